package migrations_test

import (
	"os"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

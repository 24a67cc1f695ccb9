package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"

	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
)

// Migrate plain-jobs' tables online, then print what it cost.
func ExampleUp() {
	rep, err := migrations.Up(context.Background(), os.Getenv("DATABASE_URL"), layout.PlainJobs(), migrations.Options{Out: os.Stdout})
	if err != nil {
		log.Fatal(err) // run it again: every step is idempotent
	}
	fmt.Println(rep.Summary()) // up: legacy -> migrated in 1.2s, longest lock 9ms (cutover ...)
}

// Roll back, listing the groups that would break the old unique rule.
func ExampleDown() {
	_, err := migrations.Down(context.Background(), os.Getenv("DATABASE_URL"), layout.PlainJobs(), migrations.Options{})
	var dup *migrations.DuplicatesError
	if errors.As(err, &dup) {
		for _, g := range dup.Groups {
			fmt.Printf("%s::%s has %d active jobs\n", g.Class, g.Key, g.Count)
		}
	}
}

// The golang-migrate files for plain-jobs' layout.
func ExampleFiles() {
	files, err := migrations.Files(layout.PlainJobs())
	if err != nil {
		log.Fatal(err)
	}
	var ups []string
	for name := range files {
		if strings.HasSuffix(name, ".up.sql") {
			ups = append(ups, name)
		}
	}
	slices.Sort(ups)
	for _, name := range ups {
		fmt.Println(name)
	}
	// Output:
	// 000001_version_table.up.sql
	// 000002_drop_invalid_plainjobs_j_uuid_cd8cd3_idx.up.sql
	// 000003_create_plainjobs_j_uuid_cd8cd3_idx.up.sql
	// 000004_drop_invalid_plainjobs_j_uuid_c41c85_idx.up.sql
	// 000005_create_plainjobs_j_uuid_c41c85_idx.up.sql
	// 000006_drop_invalid_plainjobs_j_uuid_b33b4c_idx.up.sql
	// 000007_create_plainjobs_j_uuid_b33b4c_idx.up.sql
	// 000008_cutover.up.sql
	// 000009_unique_rule.up.sql
	// 000010_runtime_tables.up.sql
	// 000011_skip_column.up.sql
	// 000012_analyze.up.sql
	// 000013_duplicate_check.up.sql
	// 000014_finish.up.sql
}

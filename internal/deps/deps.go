// Package deps pins the module's dependencies while the packages that use them are written; it is removed once they are.
package deps

import (
	_ "github.com/DATA-DOG/go-sqlmock"
	_ "github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	_ "github.com/golang-migrate/migrate/v4/source/iofs"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "go.opentelemetry.io/otel"
	_ "go.opentelemetry.io/otel/metric"
	_ "go.opentelemetry.io/otel/sdk/metric"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "go.opentelemetry.io/otel/trace"
	_ "golang.org/x/tools/go/analysis"
	_ "golang.org/x/tools/go/analysis/analysistest"
	_ "golang.org/x/tools/go/analysis/checker"
	_ "golang.org/x/tools/go/analysis/singlechecker"
	_ "golang.org/x/tools/go/analysis/unitchecker"
	_ "golang.org/x/tools/go/packages"
	_ "golang.org/x/tools/txtar"
)

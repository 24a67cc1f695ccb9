// Package groupstatus reads the status of the runtime's concurrency groups
// the way `migrate-unique concurrency status` shows it, and checks the
// group and class names the operator's switches take. The CLI and the
// dashboard (`concurrency serve`) both read and check through it, so that
// the page and `status --json` can never disagree.
package groupstatus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Group is one group of 'concurrency status --json'.
type Group struct {
	Group string `json:"group"`
	Class string `json:"class"`
	Key   string `json:"key"`
	// Limit is the effective limit, nil when nothing limits the group;
	// LimitSource says where it comes from: "class_pause", "override",
	// "code" (the limit the slot holders' code asked for), or "" for none.
	Limit          *int   `json:"limit"`
	LimitSource    string `json:"limit_source"`
	Override       bool   `json:"override"`
	OverrideReason string `json:"override_reason"`
	Paused         bool   `json:"paused"`
	PauseReason    string `json:"pause_reason"`
	// Queued and Running count the group's jobs in the queue's tables; nil
	// when they could not be counted (see queue_note).
	Queued  *int64 `json:"queued"`
	Running *int64 `json:"running"`
	// SlotsHeld counts unexpired slot leases, SlotsOverLimit those at or
	// above a lowered limit.
	SlotsHeld       int                 `json:"slots_held"`
	SlotsOverLimit  int                 `json:"slots_over_limit"`
	Slots           []compat.SlotStatus `json:"slots"`
	RescheduledJobs []compat.WaitingJob `json:"rescheduled_jobs"`
	LockHolders     []compat.LockHolder `json:"lock_holders"`
}

// Report is the whole output of 'concurrency status --json'.
type Report struct {
	Groups        []Group        `json:"groups"`
	PausedClasses []compat.Pause `json:"paused_classes"`
	// QueueNote says why queued and running are null, or "".
	QueueNote string `json:"queue_note"`
}

// Read reads every group that has a slot, an override or a rescheduled
// job, or whose class is paused (or group alone when it is not ""), with
// its jobs counted in the queue's tables of ql. Errors are the database's:
// pass them through Explain.
func Read(ctx context.Context, conn pgurl.Handle, slots *compat.Slots, ql layout.Resolved, group string) (Report, error) {
	var groups []compat.GroupStatus
	if group != "" {
		st, err := slots.Status(ctx, group)
		if err != nil {
			return Report{}, err
		}
		groups = []compat.GroupStatus{st}
	} else {
		var err error
		if groups, err = slots.StatusAll(ctx); err != nil {
			return Report{}, err
		}
	}
	pauses, err := slots.Overrides().Pauses(ctx)
	if err != nil {
		return Report{}, err
	}
	out := FromRuntime(groups, pauses)
	counter, note := NewCounter(ctx, conn, ql)
	out.QueueNote = note
	if counter == nil {
		return out, nil
	}
	counts, err := counter.CountAll(ctx, conn, out.Groups)
	if err != nil {
		return Report{}, fmt.Errorf("count the groups' jobs: %w", err)
	}
	for i := range out.Groups {
		out.Groups[i].Queued, out.Groups[i].Running = &counts[i].Queued, &counts[i].Running
	}
	return out, nil
}

// FromRuntime renders the runtime's status for output, without job counts.
func FromRuntime(groups []compat.GroupStatus, pauses []compat.Pause) Report {
	out := Report{Groups: []Group{}, PausedClasses: pauses}
	if out.PausedClasses == nil {
		out.PausedClasses = []compat.Pause{}
	}
	for _, g := range groups {
		gj := Group{Group: g.Group, Override: g.Override, OverrideReason: g.OverrideReason, Paused: g.Paused, PauseReason: g.PauseReason,
			SlotsHeld: g.Active, SlotsOverLimit: g.OverLimit, Slots: g.Slots, RescheduledJobs: g.Waiting, LockHolders: g.LockHolders}
		gj.Class, gj.Key = layout.SplitGroupName(g.Group)
		gj.Limit, gj.LimitSource = limitOf(g.HasLimit, g.Limit, g.Paused, g.Override)
		if gj.RescheduledJobs == nil {
			gj.RescheduledJobs = []compat.WaitingJob{}
		}
		if gj.LockHolders == nil {
			gj.LockHolders = []compat.LockHolder{}
		}
		out.Groups = append(out.Groups, gj)
	}
	return out
}

// Explain turns a database error into one that says what to do: a missing
// runtime table names the tables that are there and the command to run;
// any other error has the URL's password masked. Call it after the failed
// work's pgurl.Run has returned (RuntimeTablesState reads).
func Explain(ctx context.Context, conn *pgx.Conn, schema, url string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
		// The server's error alone: the runtime's own wording of the same
		// fix would say it twice.
		return fmt.Errorf("%s: %w", RuntimeTablesState(ctx, conn, schema), pgErr)
	}
	return pgurl.RedactError(url, err)
}

// RuntimeTablesState explains a missing runtime table: which of them exist,
// and whether the queue was rolled back (down keeps the tables that hold
// operator data) or never migrated. It reads in its own pgurl.Run: call it
// after the failed work's transaction has ended.
func RuntimeTablesState(ctx context.Context, conn *pgx.Conn, schema string) string {
	names := []string{layout.LimitsTable, layout.SlotsTable, layout.ReschedulesTable}
	var present []string
	for _, n := range names {
		var ok bool
		err := pgurl.Run(ctx, conn, func(h pgurl.Handle) error {
			return h.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1::pg_catalog.text) IS NOT NULL`, layout.Qualified(schema, n)).Scan(&ok)
		})
		if err == nil && ok {
			present = append(present, n)
		}
	}
	if len(present) == 0 {
		return fmt.Sprintf("the runtime tables (%s) are missing in schema %q: the queue is not migrated there; run 'migrate-unique up' first, or pass the right --schema", strings.Join(names, ", "), schema)
	}
	return fmt.Sprintf("schema %q holds only %s of the runtime tables (%s): the queue was rolled back with 'down', which kept them because they hold operator data, and the runtime is not in use. 'migrate-unique up' migrates the queue again (the kept overrides apply again); 'migrate-unique down' drops them once they hold nothing, 'migrate-unique down --drop-operator-data' drops them now",
		schema, strings.Join(present, ", "), strings.Join(names, ", "))
}

// BadNameError is the error of CheckGroupName, CheckClassName and
// CheckKeyLength for a name no job can have: bad input, nothing is read or
// changed. Its text says what is wrong and what to give instead.
type BadNameError struct{ msg string }

func (e *BadNameError) Error() string { return e.msg }

// MaxGroupBytes bounds a group name where the key column has no declared
// length: a longer name cannot be a key of an indexed text column (a btree
// entry holds at most about 2.7 kB).
const MaxGroupBytes = 2048

func badName(format string, args ...any) error {
	return &BadNameError{msg: fmt.Sprintf(format, args...)}
}

// NeedsEscape reports a character that is never shown raw to an operator:
// a control character (C0 but tab and newline, DEL, C1) or a bidirectional
// override, which could move the cursor, recolour or reorder what is read.
func NeedsEscape(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e || r == 0x200f || r == 0x061c:
		return true
	}
	return false
}

// IsControl reports a character no typed name or one-line text may hold:
// what NeedsEscape reports, and tab and newline too.
func IsControl(r rune) bool { return r == '\n' || r == '\t' || NeedsEscape(r) }

// CheckGroupName rejects a group name no job can have: empty, an empty
// class or key around "::", a NUL byte or invalid UTF-8 (PostgreSQL text
// holds neither), or longer than any indexed key. Control characters are
// admitted, as compat admits them in a class or key: the operator types
// them as bash's $'...' quoting writes them, as every command shows them
// (EscapeName, ShellArg).
func CheckGroupName(group string) error { return checkName("group", group) }

// checkName is CheckGroupName for a group or, once CheckClassName has
// refused a "::", a class: kind names which in the messages.
func checkName(kind, group string) error {
	class, key := layout.SplitGroupName(group)
	switch {
	case group == "" && kind == "class":
		return badName("the class name is empty; give the job's class")
	case group == "":
		return badName("the group name is empty; give the job's class, or class::key")
	case strings.ContainsRune(group, 0):
		return badName("the %s name %s contains a NUL byte; PostgreSQL text cannot hold one, so no job has it", kind, strconv.Quote(group))
	case !utf8.ValidString(group):
		return badName("the %s name %s is not valid UTF-8; PostgreSQL refuses such text (22021), so no job has it", kind, strconv.Quote(group))
	case class == "":
		return badName("the group name %s has an empty class before '::'; give class or class::key", strconv.Quote(group))
	case strings.Contains(group, "::") && key == "":
		return badName("the group name %s has an empty key after '::'; for the whole class give the class alone", strconv.Quote(group))
	case len(group) > MaxGroupBytes:
		return badName("the %s name is %d bytes long; no indexed key is longer than %d: check what was pasted", kind, len(group), MaxGroupBytes)
	}
	return nil
}

// CheckClassName refuses what cannot be a class: a group name, or a name
// no group can have.
func CheckClassName(class string) error {
	if c, _, isGroup := strings.Cut(class, "::"); isGroup {
		if c == "" {
			return badName("%s is no class: it is empty before '::'; a pause takes the job's class alone", strconv.Quote(class))
		}
		return badName("%s is a group (class::key); a pause takes the class alone (%s) and stops every key of it; to stop one group use 'concurrency set %s --limit 0'", strconv.Quote(class), ShellArg(c), ShellArg(class))
	}
	return checkName("class", class)
}

// CheckKeyLength rejects a group whose key is longer than the key column of
// the queue tables in schema can hold (varchar(n)).
func CheckKeyLength(ctx context.Context, conn pgurl.Handle, schema, group string) error {
	_, key := layout.SplitGroupName(group)
	if key == "" {
		return nil
	}
	var maxLen *int
	err := conn.QueryRow(ctx, `SELECT pg_catalog.min(a.atttypmod OPERATOR(pg_catalog.-) 4)::pg_catalog.int4 FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog."char"[])
  AND a.attname OPERATOR(pg_catalog.=) ANY (ARRAY[$2, $3]::pg_catalog.name[]) AND NOT a.attisdropped
  AND a.atttypid OPERATOR(pg_catalog.=) ANY ('{pg_catalog.varchar,pg_catalog.bpchar}'::pg_catalog.regtype[]::pg_catalog.oid[])
  AND a.atttypmod OPERATOR(pg_catalog.>) 4`, schema, layout.KeyColumn, layout.LegacyKeyColumn).Scan(&maxLen)
	if err != nil {
		return fmt.Errorf("read the key column's length: %w", err)
	}
	if n := utf8.RuneCountInString(key); maxLen != nil && n > *maxLen {
		return badName("the key of group %s is %d characters long; the queue's key column holds at most %d, so no job has it", strconv.Quote(group), n, *maxLen)
	}
	return nil
}

// classColumns are the names queues give their class column (SPEC 1).
var classColumns = []string{"job_class", "job_type", "kind"}

// GroupKnown reports whether group has a slot, an override or a waiting
// job, or jobs in a queue table of schema. Only queue tables with an index
// that leads with the class column are read (the counting indexes of up),
// so a misspelt group costs index probes, never a scan of a large table.
func GroupKnown(ctx context.Context, conn pgurl.Handle, schema, group string) (bool, error) {
	qualified := func(name string) string { return layout.Qualified(schema, name) }
	var known bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+qualified(layout.SlotsTable)+` WHERE group_name OPERATOR(pg_catalog.=) $1::pg_catalog.text)
  OR EXISTS (SELECT 1 FROM `+qualified(layout.LimitsTable)+` WHERE group_name OPERATOR(pg_catalog.=) $1::pg_catalog.text)
  OR EXISTS (SELECT 1 FROM `+qualified(layout.ReschedulesTable)+` WHERE group_name OPERATOR(pg_catalog.=) $1::pg_catalog.text)`, group).Scan(&known)
	if err != nil || known {
		return known, err
	}
	rows, err := conn.Query(ctx, `SELECT DISTINCT c.relname::pg_catalog.text, a.attname::pg_catalog.text
FROM pg_catalog.pg_index x
JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) x.indrelid JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid AND a.attnum OPERATOR(pg_catalog.=) x.indkey[0]
WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name AND a.attname OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.name[]) AND x.indisvalid
  AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute k WHERE k.attrelid OPERATOR(pg_catalog.=) c.oid AND k.attname OPERATOR(pg_catalog.=) $3::pg_catalog.name AND NOT k.attisdropped)
ORDER BY 1`, schema, classColumns, layout.KeyColumn)
	if err != nil {
		return false, err
	}
	type table struct{ name, class string }
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var t table
		return t, r.Scan(&t.name, &t.class)
	})
	if err != nil {
		return false, err
	}
	class, key := layout.SplitGroupName(group)
	for _, t := range tables {
		q := `SELECT EXISTS (SELECT 1 FROM ` + qualified(t.name) + ` WHERE ` + layout.Ident(t.class) + ` OPERATOR(pg_catalog.=) $1::pg_catalog.text`
		args := []any{class}
		if key != "" {
			q += ` AND ` + layout.Ident(layout.KeyColumn) + ` OPERATOR(pg_catalog.=) $2::pg_catalog.text`
			args = append(args, key)
		}
		if err := conn.QueryRow(ctx, q+`)`, args...).Scan(&known); err != nil || known {
			return known, err
		}
	}
	return false, nil
}

// EscapeControl renders s for a terminal: every control character (C0 but
// tab and newline, DEL, C1) and every bidirectional override is written as
// a \uXXXX escape, so that a group name, key, reason, job or table name
// read from the database can neither move the cursor, recolour nor reorder
// what the operator reads. \uXXXX is also a valid escape inside a JSON
// string, so JSON output stays valid and means the same.
func EscapeControl(s string) string { return escapeWhere(s, NeedsEscape) }

// EscapeName renders a name (a group, a class) on one line: as
// EscapeControl, and a newline or tab in it escaped too. The escapes are
// those of bash's $'...' quoting, so $'<what is shown>' types the name back
// (ShellArg writes it so).
func EscapeName(s string) string { return escapeWhere(s, IsControl) }

func escapeWhere(s string, escape func(rune) bool) string {
	if strings.IndexFunc(s, escape) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case escape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// ShellArg quotes s for a command line the operator may copy.
func ShellArg(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.,:/@", r))
	}) < 0 {
		return s
	}
	if strings.IndexFunc(s, IsControl) >= 0 || !utf8.ValidString(s) {
		// ANSI-C quoting: bash, zsh and ksh turn the escapes back into
		// the characters, so the command addresses the exact group.
		quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
		return "$'" + EscapeName(quoted) + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

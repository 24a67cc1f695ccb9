package migrations

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/version"
	"github.com/migrate-unique/migrate-unique/layout"
)

// TableStatus is one table of the layout.
type TableStatus struct {
	// Table is the quoted, schema-qualified table.
	Table string
	// KeyColumn is unique_key or concurrency_key.
	KeyColumn string
	// Rows is the planner's row estimate; RowsUnknown says the table was
	// never analysed, so there is no estimate and Rows is 0 (as
	// PlannedStep.RowsUnknown).
	Rows        int64
	RowsUnknown bool
}

// StatusResult says where a layout stands.
type StatusResult struct {
	// State is legacy, expanded, partly migrated or migrated.
	State State
	// ToolVersion is this tool's version; RecordedVersion is the version
	// that last wrote the layout's row in the version table ("" if none),
	// at RecordedAt.
	ToolVersion, RecordedVersion string
	RecordedAt                   time.Time
	// Tables lists the layout's tables.
	Tables []TableStatus
	// InvalidIndexes lists indexes of ours left invalid by an interrupted
	// build (up drops and rebuilds them).
	InvalidIndexes []string
	// Saved lists the unique rules the cutover dropped and down restores.
	Saved []SavedUnique
	// Direction is "up" or "down" when a run of that direction recorded its
	// intent and did not finish: State is then PartlyMigrated, or Expanded
	// when a complete (up on an expanded layout) stopped before its
	// cutover committed, having applied nothing of it (it gave up waiting
	// for its locks, or was interrupted). Stopped says where it stopped and
	// Next what to run.
	Direction, Stopped, Next string
	// Drift lists what no longer matches a migrated layout (a counting index
	// missing or invalid, a unique rule back on the key, a runtime table
	// missing); up repairs it.
	Drift []string
	// Run describes the session that holds the layout's run lock: a run in
	// progress, or the orphaned server session of a killed one. nil when the
	// lock is free.
	Run *BusyError
	// Pooler is set when the connection goes through a pooler: status works
	// there (it reads only), up and down refuse.
	Pooler *PoolerError
	// Kept lists, on a legacy layout, the runtime tables and column an
	// earlier down kept because they held operator data.
	Kept []KeptObject
	// UpRefusals lists why up would refuse, from the checks of what depends
	// on the key column (a partitioned queue, a trigger function naming the
	// column, ...): then Next never says to run up. Empty when migrated
	// without drift.
	UpRefusals []string
	// VersionSchema is the version schema up --expand made ("" when none):
	// the new application version reads it first on its search_path until
	// up --contract drops it.
	VersionSchema string
}

// Status reports the layout's state, read-only.
func Status(ctx context.Context, databaseURL string, l layout.Layout) (*StatusResult, error) {
	r, err := newRunner(ctx, databaseURL, l, Options{}, "status")
	if err != nil {
		return nil, err
	}
	defer r.close()
	in, _, err := r.preflight(ctx, "status")
	if pe, ok := err.(*PreflightError); ok {
		_ = pe // a refusal of up is still a state to show
		if in, err = r.inspect(ctx); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	res := &StatusResult{State: in.state(), ToolVersion: version.Version, InvalidIndexes: in.invalidOurs(),
		Direction: in.direction(), Stopped: in.stoppedRun(), Drift: in.drift(), Pooler: r.pooler}
	if res.State != Migrated || len(res.Drift) > 0 {
		deps, err := r.dependentFindings(ctx, in, "up")
		if err != nil {
			return nil, err
		}
		for _, f := range deps {
			if f.Fatal {
				res.UpRefusals = append(res.UpRefusals, f.Message)
			}
		}
	}
	if in.version != nil {
		res.VersionSchema = in.version.versionSchema
	}
	phase := ""
	if in.version != nil {
		phase, _, _ = strings.Cut(in.version.step, " ")
	}
	switch {
	case res.Direction == "up" && phase == "expand" && len(res.UpRefusals) == 0:
		res.Next = "run up --expand again to finish it (up migrates all the way), or down to roll it back"
	case res.Direction == "up" && phase == "contract":
		res.Next = "run up --contract again to finish it"
	case res.State == Expanded && len(res.Drift) > 0:
		res.Next = "run up --expand to repair the drift"
	case in.completeStoppedBeforeCutover() && len(res.UpRefusals) == 0:
		res.Next = fmt.Sprintf("run up again to complete (it refuses while the old version writes; if it gave up waiting for its locks, run it once the sessions its error named are done, or with a longer --lock-timeout or more --max-attempts), or down to roll back; the new version goes on with search_path = %s, %s meanwhile", layout.Ident(res.VersionSchema), layout.Ident(r.l.Schema))
	case res.State == Expanded && len(res.UpRefusals) == 0:
		res.Next = fmt.Sprintf("deploy the new version with search_path = %s, %s; once no instance of the old version runs, run up to complete (it refuses while the old version writes); or down to roll back", layout.Ident(res.VersionSchema), layout.Ident(r.l.Schema))
	case len(res.UpRefusals) > 0 && res.Direction == "down":
		res.Next = "run down again to finish it (up would refuse: run plan to see why)"
	case len(res.UpRefusals) > 0 && res.State == PartlyMigrated:
		res.Next = "up would refuse until what plan lists is dealt with (run plan to see it); or run down to roll back what the stopped run did"
	case len(res.UpRefusals) > 0:
		res.Next = "up would refuse: run plan to see why"
	case res.Direction == "up":
		res.Next = "run up again to finish it, or down to roll it back"
	case res.Direction == "down":
		res.Next = "run down again to finish it, or up to take the layout forward again"
	case len(res.Drift) > 0:
		res.Next = "run up to repair the drift"
	case res.State == PartlyMigrated:
		res.Next = "run up to finish the migration, or down to roll it back"
	case res.State == Migrated && res.VersionSchema != "":
		res.Next = fmt.Sprintf("complete; once every instance runs the new version, run up --contract to drop the version schema %s (the new version then reads %s through its search_path)", layout.Ident(res.VersionSchema), layout.Ident(r.l.Schema))
	case res.State == Legacy && in.runtimeLeft():
		res.Next = "rolled back; down kept runtime data: run down again once it holds nothing, or down --drop-operator-data to drop it now (up migrates again and uses it)"
	}
	if res.State == Legacy && in.runtimeLeft() {
		res.Kept = kept(ctx, r, in)
	}
	if res.Run, err = r.holder(ctx); err != nil {
		return nil, err
	}
	if in.version != nil {
		res.RecordedVersion, res.RecordedAt, res.Saved = in.version.toolVersion, in.version.updatedAt, in.version.saved
	}
	for _, t := range in.tables {
		res.Tables = append(res.Tables, TableStatus{Table: r.l.Table(t.name), KeyColumn: t.keyColumn(), Rows: t.rows, RowsUnknown: t.rowsUnknown})
	}
	return res, nil
}

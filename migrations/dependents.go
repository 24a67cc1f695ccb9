package migrations

import (
	"context"
	"strings"

	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations/internal/dependents"
)

// dependentFindings runs the checks of everything in the database that
// depends on what a run of direction changes (the key column it renames,
// the unique rules up drops; see package dependents and docs/migration.md,
// "What up checks around the queue"): a refusal is a fatal finding, an
// object PostgreSQL carries a note. It reads only.
func (r *runner) dependentFindings(ctx context.Context, in *inspection, direction string) ([]Finding, error) {
	if len(in.tables) == 0 {
		return nil, nil
	}
	target := dependents.Target{Schema: in.l.Schema, Tables: in.l.Tables(), Column: in.tables[0].keyColumn(), Up: direction == "up"}
	if in.vs != nil && in.vs.exists && in.vs.ours {
		// The expanded layout's enqueue lock: the cutover drops its
		// trigger, the version schema's drop its function.
		target.OwnFunctions = []string{in.vs.name + "." + enqueueLockName}
	}
	var steps []step
	var err error
	switch direction {
	case "up":
		if target.Column == layout.LegacyKeyColumn {
			target.Rename = layout.KeyColumn
		}
		steps, err = upSteps(in, r.opts)
	case "down":
		if target.Column == layout.KeyColumn {
			target.Rename = layout.LegacyKeyColumn
		}
		var saved []SavedUnique
		if in.version != nil {
			saved = in.version.saved
		}
		steps, err = r.downSteps(in, saved)
	}
	if err != nil {
		return nil, err
	}
	for _, s := range steps {
		if s.kind == stepConcurrent && s.skip == "" {
			target.Concurrent = append(target.Concurrent, s.table)
		}
	}
	found, err := dependents.Run(ctx, r.conn, target)
	if err != nil {
		return nil, err
	}
	out := make([]Finding, 0, len(found))
	for _, f := range found {
		out = append(out, Finding{Fatal: f.Outcome == dependents.Refused, Kind: strings.ReplaceAll(f.Kind, " ", "_"), Object: f.Object, Message: f.Message})
	}
	return out, nil
}

//go:build unix

package jobs

import "context"

// Rotate is declared in a build-tagged file.
type Rotate struct{ Log string }

func (r Rotate) UniqueKey() string { return "rotate:" + r.Log } // want UniqueKey:"migrates to ConcurrencyKey" `job type Rotate`

func (r Rotate) Run(ctx context.Context) error { return nil }

// Package exact is analysed with -interface exact.Task: only Task is a job
// interface, whatever the other interfaces' methods.
package exact

// Task is the legacy job interface, named by the -interface flag.
type Task interface { // want Task:"legacy job interface \\(migrated\\)"
	UniqueKey() string // want UniqueKey:"migrates to ConcurrencyKey" `interface Task declares UniqueKey`
	Start() error
}

// Job would be a job interface by default; with -interface it is not.
type Job interface {
	UniqueKey() string
	Run() error
}

// Upload is a Task.
type Upload struct{ Bucket string }

func (u Upload) UniqueKey() string { return u.Bucket } // want UniqueKey:"migrates to ConcurrencyKey" `job type Upload`

func (u Upload) Start() error { return nil }

// Ping only satisfies Job.
type Ping struct{}

func (Ping) UniqueKey() string { return "ping" }

func (Ping) Run() error { return nil }

// Fetch is a Task written with one-line methods one after the other: the
// fix keeps a blank line between ConcurrencyLimit and Start.
type Fetch struct{ URL string }

func (f Fetch) UniqueKey() string { return f.URL } // want UniqueKey:"migrates to ConcurrencyKey" `job type Fetch`
func (f Fetch) Start() error      { return nil }

// Package jobmodgen writes synthetic Go modules full of legacy unique-key
// jobs, for benchmarks and end-to-end tests of the code migration.
//
// A generated module has a package queue with the legacy job interface
//
//	type Job interface {
//		UniqueKey() string
//		Run(ctx context.Context) error
//	}
//
// and P packages jobs000, jobs001, ... holding J job types between them. The
// job types cycle through four shapes: pointer receiver with a provably
// non-empty key, value receiver with a possibly empty key, unnamed value
// receiver with a constant key, pointer receiver with a key that is empty on
// one path. Each package calls UniqueKey directly, through the interface, as
// a method value and on the previous package's job types, declares a
// non-job type with its own UniqueKey (which must stay untouched), and has a
// test that checks the keys. The module builds, vets and passes its tests.
//
// With the Registered layout no job package imports queue: Go's interfaces
// are structural, and a package registry (importing queue and every job
// package) lists the jobs as queue.Job values, calls UniqueKey through the
// interface and enqueues them. The job packages then call their own jobs'
// methods, a method expression and the previous package's jobs directly.
package jobmodgen

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
)

// Module is the module path of a generated module.
const Module = "example.com/legacyjobs"

// Stats counts what a generated module holds, i.e. what a migration of it
// must find.
type Stats struct {
	Packages   int // job packages (queue not counted)
	JobTypes   int // job types, each with one UniqueKey method
	Provable   int // job types whose key is provably non-empty
	Interfaces int // interfaces declaring UniqueKey (queue.Job)
	CallSites  int // calls, method values and method expressions of a job's UniqueKey
	NonJobs    int // types with a UniqueKey method that are not jobs
}

// Layout says where the job types see the legacy job interface.
type Layout int

const (
	// Importing: every job package imports queue and converts its jobs to
	// queue.Job itself.
	Importing Layout = iota
	// Registered: no job package imports queue; package registry converts
	// every job to queue.Job.
	Registered
)

// String names the layout, as the benchmarks print it.
func (l Layout) String() string {
	if l == Registered {
		return "registered (no job package imports the interface)"
	}
	return "importing (every job package imports the interface)"
}

// Generate writes a module with the given number of job packages and job
// types, laid out as layout says, into dir, which must be empty or absent,
// and returns what it holds.
func Generate(dir string, packages, jobs int, layout Layout) (Stats, error) {
	if packages < 1 || jobs < packages {
		return Stats{}, fmt.Errorf("jobmodgen: want at least 1 package and at least one job type per package, got %d packages and %d jobs", packages, jobs)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return Stats{}, fmt.Errorf("jobmodgen: %s is not empty", dir)
	}
	// queue.Enqueue calls Job.UniqueKey once.
	st := Stats{Packages: packages, JobTypes: jobs, Interfaces: 1, CallSites: 1}
	files := map[string][]byte{
		"go.mod":         []byte("module " + Module + "\n\ngo 1.24\n"),
		"queue/queue.go": []byte(queueSource),
	}
	global := 0
	var registered [][]string // per job package
	for k := 0; k < packages; k++ {
		n := jobs / packages
		if k < jobs%packages {
			n++
		}
		prevFirst := global - (jobs / packages)
		if k-1 < jobs%packages {
			prevFirst--
		}
		src, test, all, pst := jobPackage(k, global, n, prevFirst, layout)
		registered = append(registered, all)
		global += n
		st.Provable += pst.Provable
		st.CallSites += pst.CallSites
		st.NonJobs += pst.NonJobs
		name := pkgName(k)
		files[filepath.Join(name, name+".go")] = src
		files[filepath.Join(name, name+"_test.go")] = test
	}
	if layout == Registered {
		files["registry/registry.go"], files["registry/registry_test.go"] = registry(packages, registered)
		st.CallSites++ // the method value in registry.InterfaceKeys
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if filepath.Ext(name) == ".go" {
			formatted, err := format.Source(content)
			if err != nil {
				return Stats{}, fmt.Errorf("jobmodgen: format %s: %w", name, err)
			}
			content = formatted
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return Stats{}, fmt.Errorf("jobmodgen: %w", err)
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return Stats{}, fmt.Errorf("jobmodgen: %w", err)
		}
	}
	return st, nil
}

func pkgName(k int) string { return fmt.Sprintf("jobs%03d", k) }

const queueSource = `// Package queue is a legacy job queue: one active job per unique key.
package queue

import (
	"context"
	"fmt"
)

// Job is the legacy job interface.
type Job interface {
	// UniqueKey returns the job's unique key; "" means not unique.
	UniqueKey() string
	Run(ctx context.Context) error
}

// Queue remembers the keys of the jobs enqueued.
type Queue struct {
	keys map[string]bool
	jobs []Job
}

// Enqueue adds a job unless its key is taken.
func (q *Queue) Enqueue(ctx context.Context, j Job) error {
	if q.keys == nil {
		q.keys = map[string]bool{}
	}
	if key := j.UniqueKey(); key != "" {
		if q.keys[key] {
			return fmt.Errorf("job %q already enqueued", key)
		}
		q.keys[key] = true
	}
	q.jobs = append(q.jobs, j)
	return nil
}

// Len is the number of jobs enqueued.
func (q *Queue) Len() int { return len(q.jobs) }
`

// jobPackage returns package k's source and test, holding n job types
// numbered from first (the previous package's start at prevFirst), and one
// value of each job type written from another package.
func jobPackage(k, first, n, prevFirst int, layout Layout) (src, test []byte, registered []string, st Stats) {
	var b, t bytes.Buffer
	name := pkgName(k)
	fmt.Fprintf(&b, "// Package %s holds generated legacy jobs.\npackage %s\n\nimport (\n\t\"context\"\n\t\"strconv\"\n", name, name)
	if layout == Importing {
		fmt.Fprintf(&b, "\n\t\"%s/queue\"\n", Module)
	}
	if k > 0 {
		fmt.Fprintf(&b, "\tprev \"%s/%s\"\n", Module, pkgName(k-1))
	}
	b.WriteString(")\n\nvar _ = strconv.Itoa\n\n")

	var all, keys []string
	for i := 0; i < n; i++ {
		g := first + i
		typ := fmt.Sprintf("Job%d", g)
		switch g % 4 {
		case 0: // pointer receiver, provably non-empty
			st.Provable++
			fmt.Fprintf(&b, "// %s is a job keyed by its ID.\ntype %s struct{ ID int }\n\n", typ, typ)
			fmt.Fprintf(&b, "// UniqueKey returns the key of %s.\nfunc (j *%s) UniqueKey() string { return \"%s:\" + strconv.Itoa(j.ID) }\n\n", typ, typ, typ)
			fmt.Fprintf(&b, "// Run runs the job.\nfunc (j *%s) Run(ctx context.Context) error { return ctx.Err() }\n\n", typ)
			all = append(all, fmt.Sprintf("&%s{ID: %d}", typ, g))
			registered = append(registered, fmt.Sprintf("&%s.%s{ID: %d}", name, typ, g))
			keys = append(keys, fmt.Sprintf("(&%s{ID: %d}).UniqueKey()", typ, g))
		case 1: // value receiver, possibly empty
			fmt.Fprintf(&b, "// %s is a job keyed by its tenant.\ntype %s struct{ Tenant string }\n\n", typ, typ)
			fmt.Fprintf(&b, "// UniqueKey returns the tenant.\nfunc (j %s) UniqueKey() string { return j.Tenant }\n\n", typ)
			fmt.Fprintf(&b, "// Run runs the job.\nfunc (j %s) Run(ctx context.Context) error { return ctx.Err() }\n\n", typ)
			all = append(all, fmt.Sprintf("%s{Tenant: \"t%d\"}", typ, g))
			registered = append(registered, fmt.Sprintf("%s.%s{Tenant: \"t%d\"}", name, typ, g))
			keys = append(keys, fmt.Sprintf("%s{Tenant: \"t%d\"}.UniqueKey()", typ, g))
		case 2: // unnamed value receiver, constant key
			st.Provable++
			fmt.Fprintf(&b, "// %s is a singleton job.\ntype %s struct{}\n\n", typ, typ)
			fmt.Fprintf(&b, "func (%s) UniqueKey() string { return \"%s\" }\n\n", typ, typ)
			fmt.Fprintf(&b, "// Run runs the job.\nfunc (%s) Run(ctx context.Context) error { return ctx.Err() }\n\n", typ)
			all = append(all, typ+"{}")
			registered = append(registered, name+"."+typ+"{}")
			keys = append(keys, typ+"{}.UniqueKey()")
		case 3: // pointer receiver, empty on one path
			fmt.Fprintf(&b, "// %s is a job keyed by its region, when it has one.\ntype %s struct{ Region string }\n\n", typ, typ)
			fmt.Fprintf(&b, "func (j *%s) UniqueKey() string {\n\tif j.Region == \"\" {\n\t\treturn \"\"\n\t}\n\treturn \"%s:\" + j.Region\n}\n\n", typ, typ)
			fmt.Fprintf(&b, "// Run runs the job.\nfunc (j *%s) Run(ctx context.Context) error { return ctx.Err() }\n\n", typ)
			all = append(all, fmt.Sprintf("&%s{Region: \"r%d\"}", typ, g))
			registered = append(registered, fmt.Sprintf("&%s.%s{Region: \"r%d\"}", name, typ, g))
			keys = append(keys, fmt.Sprintf("(&%s{Region: \"r%d\"}).UniqueKey()", typ, g))
		}
		st.CallSites++ // the call in Keys
	}
	if layout == Importing {
		b.WriteString("// All returns one job of each type.\nfunc All() []queue.Job {\n\treturn []queue.Job{\n")
	} else {
		b.WriteString("// All returns one job of each type.\nfunc All() []any {\n\treturn []any{\n")
	}
	for _, j := range all {
		fmt.Fprintf(&b, "\t\t%s,\n", j)
	}
	b.WriteString("\t}\n}\n\n// Keys returns the key of each job of All, calling each type's method.\nfunc Keys() []string {\n\treturn []string{\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "\t\t%s,\n", k)
	}
	b.WriteString("\t}\n}\n\n")

	// Calls through the interface and a method value.
	if layout == Importing {
		b.WriteString("// InterfaceKeys returns the keys through the job interface.\nfunc InterfaceKeys() []string {\n\tvar out []string\n\tfor _, j := range All() {\n\t\tkey := j.UniqueKey\n\t\tout = append(out, key())\n\t}\n\treturn out\n}\n\n")
		st.CallSites++
		b.WriteString("// EnqueueAll enqueues one job of each type.\nfunc EnqueueAll(ctx context.Context, q *queue.Queue) error {\n\tfor _, j := range All() {\n\t\tif err := q.Enqueue(ctx, j); err != nil {\n\t\t\treturn err\n\t\t}\n\t}\n\treturn nil\n}\n\n")
	} else {
		b.WriteString("// Run runs one job of each type.\nfunc Run(ctx context.Context) error {\n\tfor _, j := range All() {\n\t\tif r, ok := j.(interface{ Run(context.Context) error }); ok {\n\t\t\tif err := r.Run(ctx); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n\t\t}\n\t}\n\treturn nil\n}\n\n")
	}

	// A method expression of the first job type.
	first0 := fmt.Sprintf("Job%d", first)
	recv := first0
	if first%4 == 0 || first%4 == 3 {
		recv = "(*" + first0 + ")"
	}
	fmt.Fprintf(&b, "// KeyFunc is the first job type's key method.\nvar KeyFunc = %s.UniqueKey\n\n", recv)
	st.CallSites++

	if k > 0 {
		upstream := "prev.All()[0].UniqueKey()"
		if layout == Registered {
			upstream = fmt.Sprintf("prev.Job%d{}.UniqueKey()", prevFirst)
			if prevFirst%4 == 0 || prevFirst%4 == 3 {
				upstream = fmt.Sprintf("(&prev.Job%d{}).UniqueKey()", prevFirst)
			}
		}
		fmt.Fprintf(&b, "// Upstream returns the keys of the previous package's jobs, through its types.\nfunc Upstream() []string {\n\treturn append(prev.Keys(), %s)\n}\n\n", upstream)
		st.CallSites++
	}

	// A type with a UniqueKey method that is not a job: it must stay.
	b.WriteString("// cacheEntry is not a job: its UniqueKey names a cache slot.\ntype cacheEntry struct{ slot int }\n\n")
	b.WriteString("// UniqueKey names the cache slot.\nfunc (c cacheEntry) UniqueKey() string { return \"slot:\" + strconv.Itoa(c.slot) }\n\n")
	b.WriteString("// CacheKey returns a cache slot's key.\nfunc CacheKey(slot int) string { return cacheEntry{slot}.UniqueKey() }\n")
	st.NonJobs++

	if layout == Registered {
		fmt.Fprintf(&t, `package %s

import (
	"context"
	"testing"
)

func TestKeys(t *testing.T) {
	if keys := Keys(); len(keys) != %d {
		t.Fatalf("got %%d keys, want %d", len(keys))
	}
	if got := CacheKey(3); got != "slot:3" {
		t.Errorf("CacheKey(3) = %%q", got)
	}
	if err := Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
`, name, n, n)
		return b.Bytes(), t.Bytes(), registered, st
	}
	fmt.Fprintf(&t, "package %s\n\nimport (\n\t\"context\"\n\t\"testing\"\n\n\t\"%s/queue\"\n)\n\n", name, Module)
	fmt.Fprintf(&t, `func TestKeys(t *testing.T) {
	keys, viaInterface := Keys(), InterfaceKeys()
	if len(keys) != %d || len(viaInterface) != %d {
		t.Fatalf("got %%d and %%d keys, want %d", len(keys), len(viaInterface))
	}
	for i := range keys {
		if keys[i] != viaInterface[i] {
			t.Errorf("key %%d: %%q directly, %%q through the interface", i, keys[i], viaInterface[i])
		}
	}
	if got := CacheKey(3); got != "slot:3" {
		t.Errorf("CacheKey(3) = %%q", got)
	}
}

func TestEnqueue(t *testing.T) {
	var q queue.Queue
	if err := EnqueueAll(context.Background(), &q); err != nil {
		t.Fatal(err)
	}
	if q.Len() != %d {
		t.Fatalf("enqueued %%d jobs, want %d", q.Len())
	}
}
`, n, n, n, n, n)
	return b.Bytes(), t.Bytes(), registered, st
}

// registry returns package registry's source and test: every job of the
// module as a queue.Job value (one function per job package, as a
// registry grows), keys through the interface, an enqueue.
func registry(packages int, perPackage [][]string) (src, test []byte) {
	n := 0
	for _, jobs := range perPackage {
		n += len(jobs)
	}
	var b bytes.Buffer
	b.WriteString("// Package registry registers every job of the module with the queue; no job\n// package imports the queue.\npackage registry\n\nimport (\n\t\"context\"\n\n")
	fmt.Fprintf(&b, "\t\"%s/queue\"\n", Module)
	for k := 0; k < packages; k++ {
		fmt.Fprintf(&b, "\t\"%s/%s\"\n", Module, pkgName(k))
	}
	b.WriteString(")\n\n// All returns one job of each type.\nfunc All() []queue.Job {\n\tvar all []queue.Job\n")
	for k := range perPackage {
		fmt.Fprintf(&b, "\tall = append(all, from%s()...)\n", pkgName(k))
	}
	b.WriteString("\treturn all\n}\n\n")
	for k, jobs := range perPackage {
		fmt.Fprintf(&b, "func from%s() []queue.Job {\n\treturn []queue.Job{\n", pkgName(k))
		for _, j := range jobs {
			fmt.Fprintf(&b, "\t\t%s,\n", j)
		}
		b.WriteString("\t}\n}\n\n")
	}
	b.WriteString("// InterfaceKeys returns the keys through the job interface.\nfunc InterfaceKeys() []string {\n\tvar out []string\n\tfor _, j := range All() {\n\t\tkey := j.UniqueKey\n\t\tout = append(out, key())\n\t}\n\treturn out\n}\n\n")
	b.WriteString("// EnqueueAll enqueues one job of each type.\nfunc EnqueueAll(ctx context.Context, q *queue.Queue) error {\n\tfor _, j := range All() {\n\t\tif err := q.Enqueue(ctx, j); err != nil {\n\t\t\treturn err\n\t\t}\n\t}\n\treturn nil\n}\n")
	test = fmt.Appendf(nil, `package registry

import (
	"context"
	"testing"

	"%s/queue"
)

func TestEnqueue(t *testing.T) {
	if keys := InterfaceKeys(); len(keys) != %d {
		t.Fatalf("got %%d keys, want %d", len(keys))
	}
	var q queue.Queue
	if err := EnqueueAll(context.Background(), &q); err != nil {
		t.Fatal(err)
	}
	if q.Len() != %d {
		t.Fatalf("enqueued %%d jobs, want %d", q.Len())
	}
}
`, Module, n, n, n, n)
	return b.Bytes(), test
}

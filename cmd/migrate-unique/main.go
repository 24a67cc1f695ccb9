// Command migrate-unique moves PostgreSQL job queues off a binary unique_key
// onto a concurrency key plus a concurrency limit: the database migration,
// the code migration (lint, rewrite, vet and fix tools) and the runtime's
// operator commands, in one binary. Run `migrate-unique help` for the list.
//
// This package only wires commands to the packages that do the work.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/migrate-unique/migrate-unique/internal/version"
)

// command is one subcommand. run gets the arguments after the command name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
	// rawOutput: the command prints source code (diffs, fixed files) that
	// must stay byte-exact, so its output is not escaped.
	rawOutput bool
}

// env is what a command may touch of the process.
type env struct {
	stdout, stderr io.Writer
	// isTerminal reports whether stdout is a terminal (progress bars).
	isTerminal bool
}

// commands lists every subcommand in the order help shows them.
var commands = []command{
	{"plan", "show what the database migration would do, changing nothing", runPlan, false},
	{"up", "run the database migration, online", runUp, false},
	{"down", "roll the database migration back", runDown, false},
	{"status", "show whether the database is legacy, expanded, partly migrated or migrated", runStatus, false},
	{"sql", "write the migration as golang-migrate files", runSQL, false},
	{"lint", "report legacy unique-key job code", runLint, true},
	{"rewrite", "migrate a whole module's job code", runRewrite, true},
	{"concurrency", "inspect and steer concurrency groups", runConcurrency, false},
	{"bench", "run a benchmark against its baseline", runBench, false},
	{"demo", "show the whole migration on a throwaway database", runDemo, false},
	{"version", "print the version", runVersion, false},
	{"help", "show this help or a command's flags", nil, false},
}

// exitError carries a specific exit code, for commands whose exit status is
// part of their interface (lint findings, rewrite diffs).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func main() {
	if vetToolProtocol(os.Args[1:]) {
		runVetTool() // never returns
	}
	os.Exit(runProcess(&env{stdout: os.Stdout, stderr: os.Stderr, isTerminal: isTerminal(os.Stdout)}, os.Args[1:]))
}

// runProcess runs one command line as the process does (main passes the
// real standard outputs), cancelled by SIGINT or SIGTERM.
//
// The first signal cancels the command's context: a statement running on
// the server is sent a cancel request and the command waits for it to end
// (see pgurl.CancelOnDone), so nothing of the run outlives the process. A
// second signal ends the process at once, as signals do by default.
func runProcess(e *env, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if watcherStarts != nil {
			watcherStarts(ctx)
		}
		select {
		case <-ctx.Done():
			stop()
			fmt.Fprintln(e.stderr, "migrate-unique: interrupted; stopping (a statement running on the server is cancelled first: interrupt again to quit at once and leave it running)")
		case <-done:
		}
	}()
	// stop cancels ctx too: only once the watcher has seen done and
	// returned, or a command that ended by itself would be reported as
	// interrupted.
	defer func() {
		close(done)
		<-watched
		stop()
	}()
	return run(ctx, e, args)
}

// watcherStarts is nil except in the test that makes the signal watcher
// start late, when the command may already have returned.
var watcherStarts func(ctx context.Context)

// run executes one command line and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		printHelp(e.stderr)
		return 2
	}
	name := args[0]
	if isHelp(name) {
		// "help COMMAND" is "COMMAND -h"; every other form (help help,
		// help -h, -h -h) is the list of commands.
		if len(args) > 1 && !isHelp(args[1]) {
			return run(ctx, e, []string{args[1], "-h"})
		}
		printHelp(e.stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != name || c.run == nil {
			continue
		}
		if !c.rawOutput {
			// Names, keys and definitions read from a database reach the
			// terminal only escaped.
			e = &env{stdout: &escapingWriter{w: e.stdout}, stderr: &escapingWriter{w: e.stderr}, isTerminal: e.isTerminal}
		}
		err := c.run(ctx, e, args[1:])
		var ee *exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ee):
			if ee.err != nil {
				fmt.Fprintf(e.stderr, "migrate-unique %s: %v\n", name, ee.err)
			}
			return ee.code
		default:
			fmt.Fprintf(e.stderr, "migrate-unique %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "migrate-unique: unknown command %q; run 'migrate-unique help' for the list\n", name)
	return 2
}

func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

func printHelp(w io.Writer) {
	fmt.Fprintf(w, "migrate-unique %s: move a PostgreSQL job queue from unique_key to concurrency keys and limits.\n\nUsage:\n", version.Version)
	for _, c := range commands {
		fmt.Fprintf(w, "  migrate-unique %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'migrate-unique COMMAND -h' for a command's flags. Docs: docs/ in the source tree.\n")
}

// newFlagSet returns a flag set whose -h output names the command, its usage
// line and every flag.
func newFlagSet(e *env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		out := fs.Output()
		var defaults bytes.Buffer
		fs.SetOutput(&defaults)
		fs.PrintDefaults()
		fs.SetOutput(out)
		list := defaults.String()
		if strings.Contains(usage, "--") {
			list = flagDefaultRE.ReplaceAllString(list, "${1}--${2}")
		}
		fmt.Fprintf(out, "Usage: migrate-unique %s\n\nFlags:\n%s", usage, list)
	}
	return fs
}

// doubleDash reports whether fs's usage writes its flags --name, as the
// docs of every command do but lint, rewrite and the benchmarks over a Go
// module, whose docs write -name as Go's own tools do.
func doubleDash(fs *flag.FlagSet) bool {
	out := fs.Output()
	var usage bytes.Buffer
	fs.SetOutput(&usage)
	fs.Usage()
	fs.SetOutput(out)
	return strings.Contains(usage.String(), "\n  --")
}

// flagDefaultRE and flagErrorRE find a flag name the flag package writes
// with one dash, in -h's list of flags and in its errors: where the
// command's docs write --name, both are written so (a one-letter flag
// keeps its one dash, -w, as Go's tools write it).
var (
	flagDefaultRE = regexp.MustCompile(`(?m)^(  )-([A-Za-z0-9][A-Za-z0-9_-]+)`)
	flagErrorRE   = regexp.MustCompile(`(not defined: |for flag |value "(?:[^"\\]|\\.)*" for |needs an argument: )-([A-Za-z0-9][A-Za-z0-9_-]+)`)
)

// emptyAllowed lists the flags whose empty value means something: no
// reason, no build tags.
var emptyAllowed = map[string]bool{"reason": true, "tags": true}

// parseFlags parses args into fs. -h returns flag.ErrHelp (exit 0, the usage
// is printed); any other error is a usage error (exit 2) that the flag
// package has already printed with the usage. A flag given an empty value
// is a usage error too: a script that passes an unset variable
// (--schema "$SCHEMA") must not get the default instead.
func parseFlags(fs *flag.FlagSet, args []string) error {
	// The flag package prints the whole usage after a bad flag: keep it for
	// -h only, and say the one thing that is wrong otherwise.
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		_, _ = out.Write(buf.Bytes())
		return err
	default:
		msg := err.Error()
		if doubleDash(fs) {
			msg = flagErrorRE.ReplaceAllStringFunc(msg, func(m string) string {
				i := strings.LastIndex(m, " -")
				return m[:i] + " --" + m[i+2:]
			})
		}
		return &exitError{code: 2, err: fmt.Errorf("%s; run 'migrate-unique %s -h' for its flags", msg, fs.Name())}
	}
	var empty error
	fs.Visit(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return // a list flag: its own Set sees each value
		}
		if v, isString := g.Get().(string); empty == nil && isString && !emptyAllowed[f.Name] && strings.TrimSpace(v) == "" {
			empty = fmt.Errorf("--%s is empty: give it a value, or leave the flag out for its default", f.Name)
		}
	})
	if empty != nil {
		return &exitError{code: 2, err: empty}
	}
	return nil
}

func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "version", "version")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "migrate-unique %s\n", version.Version)
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

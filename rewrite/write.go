package rewrite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces every changed file. It first checks each file is still the
// regular file that was loaded and writes every new content to a temporary
// file beside it (same directory, same mode, synced); only when all of them
// are ready does it rename them over the originals. A failure before the
// renames leaves every file as it was; a file is never half written.
func (r *Result) Write() error {
	for _, f := range r.Files {
		st, err := os.Lstat(f.Path)
		if err != nil {
			return fmt.Errorf("nothing was written: %w", err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("nothing was written: %s is not a regular file (%s); rewrite replaces regular files only", f.Path, st.Mode().Type())
		}
		cur, err := os.ReadFile(f.Path)
		if err != nil {
			return fmt.Errorf("nothing was written: %w", err)
		}
		if !bytes.Equal(cur, f.Old) {
			return &FileChangedError{File: f.Path}
		}
	}
	temps := make([]string, 0, len(r.Files))
	cleanup := func() {
		for _, t := range temps {
			os.Remove(t)
		}
	}
	for _, f := range r.Files {
		t, err := writeTemp(f)
		if err != nil {
			cleanup()
			return fmt.Errorf("nothing was written: %w", err)
		}
		temps = append(temps, t)
	}
	for i, f := range r.Files {
		if err := os.Rename(temps[i], f.Path); err != nil {
			temps = temps[i:]
			cleanup()
			var done []string
			for _, w := range r.Files[:i] {
				done = append(done, relPath(r.ModuleDir, w.Path))
			}
			return fmt.Errorf("replace %s: %w (already rewritten: %v; the others are unchanged)", f.Path, err, done)
		}
	}
	return nil
}

// writeTemp writes f's new content to a temporary file in f's directory and
// returns its name.
func writeTemp(f FileChange) (string, error) {
	dir, base := filepath.Split(f.Path)
	tf, err := os.CreateTemp(dir, "."+base+".migrate-unique-*")
	if err != nil {
		return "", fmt.Errorf("create a temporary file beside %s: %w", f.Path, err)
	}
	name := tf.Name()
	_, err = tf.Write(f.New)
	err = errors.Join(err, tf.Chmod(f.Mode), tf.Sync())
	err = errors.Join(err, tf.Close())
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("write the new %s: %w", f.Path, err)
	}
	return name, nil
}

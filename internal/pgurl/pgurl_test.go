package pgurl

import (
	"errors"
	"strings"
	"testing"
)

func TestRedactRemovesPasswords(t *testing.T) {
	tests := []string{
		"postgres://app:s3cret@db.example:5432/jobs?sslmode=disable",
		"postgres://app@db.example/jobs?password=s3cret",
		"host=db user=app password=s3cret dbname=jobs",
		"host=db user=app password='s3cret' dbname=jobs",
		// Unencoded characters net/url rejects must not expose the password.
		"postgres://app:s3cret/x@db.example:5432/jobs",
		"postgres://app:s3cret#x@db.example/jobs",
		"postgres://app:s3cret?x@db.example/jobs",
		"postgres://app:s3cret x@db.example/jobs",
	}
	for _, in := range tests {
		got := Redact(in)
		if strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, still shows the password", in, got)
		}
		if !strings.Contains(got, "xxxxx") {
			t.Errorf("Redact(%q) = %q, want the password replaced by xxxxx", in, got)
		}
	}
	for _, in := range tests {
		if got := Describe(in); strings.Contains(got, "s3cret") {
			t.Errorf("Describe(%q) = %q, still shows the password", in, got)
		}
		if got := RedactError(in, errors.New("connect "+in+": failed")).Error(); strings.Contains(got, "s3cret") {
			t.Errorf("RedactError(%q) = %q, still shows the password", in, got)
		}
	}
	if got := Redact("postgres://app@db/jobs"); got != "postgres://app@db/jobs" {
		t.Errorf("Redact without password = %q, want it unchanged", got)
	}
}

func TestRedactError(t *testing.T) {
	u := "postgres://app:s3cret@db.example/jobs"
	base := errors.New("cannot parse `" + u + "`: failed")
	err := RedactError(u, base)
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("RedactError kept the password: %v", err)
	}
	if !errors.Is(err, base) {
		t.Fatalf("RedactError lost the wrapped error")
	}
}

func TestResolve(t *testing.T) {
	t.Setenv(EnvVar, "")
	if _, err := Resolve(""); !errors.Is(err, ErrMissing) {
		t.Fatalf("Resolve with nothing = %v, want ErrMissing", err)
	}
	t.Setenv(EnvVar, "postgres://env/db")
	if got, _ := Resolve(""); got != "postgres://env/db" {
		t.Fatalf("Resolve fell back to %q, want $DATABASE_URL", got)
	}
	if got, _ := Resolve("postgres://flag/db"); got != "postgres://flag/db" {
		t.Fatalf("Resolve = %q, want the flag to win", got)
	}
}

package pgurl

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// secret is the password every corpus entry carries somewhere.
const secret = "Sup3rS3cret"

// corpus reads testdata/secrets.txt.
func corpus(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "secrets.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			t.Fatalf("testdata/secrets.txt: %s: %v", line, err)
		}
		out = append(out, s)
	}
	return out
}

// leaked reports whether out shows the secret or any 5-character piece of it.
func leaked(out string) bool {
	for i := 0; i+5 <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+5]) {
			return true
		}
	}
	return false
}

func TestNothingShowsThePassword(t *testing.T) {
	for _, in := range corpus(t) {
		shown := map[string]string{
			"Redact":               Redact(in),
			"Describe":             Describe(in),
			"RedactError(connect)": RedactError(in, errors.New("connect "+in+": failed")).Error(),
			"RedactError(quote)":   RedactError(in, errors.New("cannot parse `"+strings.ReplaceAll(in, "@", "?")+"`")).Error(),
		}
		if _, err := ParseConfig(in); err != nil {
			shown["ParseConfig"] = err.Error()
			shown["RedactError(parse)"] = RedactError(in, err).Error()
		}
		for what, out := range shown {
			if leaked(out) {
				t.Errorf("%s(%q) = %q shows the password", what, in, out)
			}
		}
	}
}

// Where parsing fails, the error says why without quoting the input, and
// keeps the scheme and an unambiguous host.
func TestParseErrorsSayWhy(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://u:pa@ss@db.example/jobs", "more than one '@'"},
		{"postgres://u:pass%zz@db.example/jobs", "a '%' is not followed by two hexadecimal digits"},
		{"postgres://u:pa/ss@db.example/jobs", "an '@' after the first '/'"},
		{"host=db password='a b secret", "a quoted value is not closed"},
		{"password=a b secret host=db", "a word without '='"},
		{"host=db sslmode=bogus", "sslmode is not one of"},
		{"postgres://u:pass@db.example:99999/jobs", "port"},
	}
	for _, c := range cases {
		_, err := ParseConfig(c.in)
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseConfig(%q) = %v, want a *ParseError saying %q", c.in, err, c.want)
		}
	}
	_, err := ParseConfig("postgres://u:pass%zz@db.example:5433/jobs")
	if !strings.Contains(err.Error(), "postgres://…db.example:5433…") {
		t.Errorf("the error does not keep the scheme and unambiguous host: %v", err)
	}
	_, err = ParseConfig("postgres://u:pa@ss@db.example/jobs")
	if strings.Contains(err.Error(), "db.example") {
		t.Errorf("the error shows a host that was ambiguous: %v", err)
	}
}

func TestRedactKeepsWhatIsNotSecret(t *testing.T) {
	if got := Redact("postgres://app@db/jobs"); got != "postgres://app@db/jobs" {
		t.Errorf("Redact without password = %q, want it unchanged", got)
	}
	if got := Redact("postgres://app:" + secret + "@db:5433/jobs?sslmode=disable"); got != "postgres://app:xxxxx@db:5433/jobs?sslmode=disable" {
		t.Errorf("Redact = %q, want the password replaced by xxxxx", got)
	}
	if got := Describe("host=db port=5433 dbname=jobs password=" + secret); got != "db:5433/jobs" {
		t.Errorf("Describe = %q, want db:5433/jobs", got)
	}
	// A one-letter password is not masked all over the message.
	if got := RedactError("postgres://u:a@db/jobs", errors.New("a database named jobs")).Error(); got != "a database named jobs" {
		t.Errorf("RedactError with a short password = %q, want the message intact", got)
	}
}

func TestRedactErrorKeepsTheChain(t *testing.T) {
	u := "postgres://app:" + secret + "@db.example/jobs"
	base := errors.New("cannot parse `" + u + "`: failed")
	err := RedactError(u, base)
	if leaked(err.Error()) {
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

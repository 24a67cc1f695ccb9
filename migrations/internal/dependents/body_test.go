package dependents

import "testing"

func TestRefersToReadsValuesUnderBothNamesAsSafe(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`k := to_jsonb(NEW)->>'unique_key';`, true}, // NULL after the rename
		{`k := coalesce(to_jsonb(NEW)->>'concurrency_key', to_jsonb(NEW)->>'unique_key');`, false},
		{`k := TD['new']['unique_key']`, true}, // plpython, any quotes
		{`k := TD["new"]["unique_key"]`, true},
		{`-- unique_key` + "\n" + `RETURN 1;`, false},
	} {
		if got := refersTo(tokens(c.body), "unique_key", "concurrency_key"); got != c.want {
			t.Errorf("refersTo(%q) = %v, want %v", c.body, got, c.want)
		}
	}
}

func TestNamesReadsIdentifiersNotCommentsNorValues(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`BEGIN NEW.unique_key := NULL; END`, true},
		{`SELECT Unique_Key FROM jobs`, true}, // folded to lower case
		{`SELECT "unique_key" FROM jobs`, true},
		{`SELECT "Unique_Key" FROM jobs`, false}, // another column
		{`EXECUTE 'SELECT count(*) FROM jobs WHERE unique_key = $1'`, true},
		{`EXECUTE E'SELECT unique_key\n FROM jobs'`, true},
		{`EXECUTE $q$ UPDATE jobs SET unique_key = NULL $q$`, true},
		{`k := to_jsonb(NEW)->>'unique_key';`, false}, // a value: works under both names
		{`-- unique_key is not read here` + "\n" + `RETURN 1;`, false},
		{`/* unique_key /* nested */ still a comment */ RETURN 1;`, false},
		{`SELECT no_unique_key_here, unique_keys FROM t`, false},
		{`SELECT $1 || 'it''s unique_key-free'`, true}, // dynamic text naming it as a word
		{`SELECT 'it''s' || unique_key FROM t`, true},
	} {
		if got := names(tokens(c.body), "unique_key"); got != c.want {
			t.Errorf("names(%q) = %v, want %v", c.body, got, c.want)
		}
	}
}

func TestNamesTable(t *testing.T) {
	for _, c := range []struct {
		body, table string
		want        bool
	}{
		{`INSERT INTO public.jobs (unique_key) VALUES (1)`, "jobs", true},
		{`INSERT INTO "Billing Queue"."JobRequests" (unique_key) VALUES (1)`, "JobRequests", true},
		{`INSERT INTO jobrequests (unique_key) VALUES (1)`, "JobRequests", false},
		{`SELECT 1 FROM jobs_archive`, "jobs", false},
		{`EXECUTE format('DELETE FROM %I', 'jobs')`, "jobs", true},
	} {
		if got := namesTable(tokens(c.body), c.table); got != c.want {
			t.Errorf("namesTable(%q, %q) = %v, want %v", c.body, c.table, got, c.want)
		}
	}
}

// FuzzTokens: any body, however broken (unterminated strings, comments,
// dollar quotes), is read to its end.
func FuzzTokens(f *testing.F) {
	for _, s := range []string{`'unterminated`, `/* open /* nested */`, `$tag$ never closed`, `E'\`, `"open`, `$1 $ $$`, "x\x00'\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = names(tokens(s), "unique_key")
	})
}

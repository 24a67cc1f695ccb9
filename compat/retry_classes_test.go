package compat

import (
	"errors"
	"testing"
	"time"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Job types of the registry test, each stored with itself as its Args.
type (
	// wideExport allows three active exports per account.
	wideExport struct{ Account string }
	// freeSync groups by account without a limit.
	freeSync struct{ Account string }
	// legacyMail is an old job type: UniqueKey only.
	legacyMail struct{ To string }
)

func (j wideExport) ConcurrencyKey() string        { return j.Account }
func (j wideExport) ConcurrencyLimit() (int, bool) { return 3, true }
func (j freeSync) ConcurrencyKey() string          { return j.Account }
func (j legacyMail) UniqueKey() string             { return j.To }

// TestRetriesTakeEachClassLimit: with a registry of job classes, a retry is
// admitted under its class's own limit, read from the rebuilt job value as
// Enqueue reads it, not under the legacy limit 1: a limit-3 class and an
// unlimited keyed class retry while their group holds other jobs, where the
// legacy reading refuses them. A legacy job type keeps limit 1, a scheduled
// occurrence of an unlimited job keeps Scheduled's limit 1, a class the
// registry does not name falls back to the legacy reading, and parameters
// the registry cannot decode are a clear error that retries nothing.
func TestRetriesTakeEachClassLimit(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	classes := Classes{
		"app.Export": Decode[wideExport],
		"app.Sync":   Decode[freeSync],
		"app.Mail":   Decode[legacyMail],
	}
	enqueue := func(class string, value, args any) int64 {
		t.Helper()
		res, err := q.c.Enqueue(ctx, Job{Class: class, Value: value, Args: args, Retries: 3})
		if err != nil || !res.Inserted() {
			t.Fatalf("enqueue %s %+v: %+v %v", class, value, res, err)
		}
		return res.ID
	}
	retry := func(resultID int64, o RetryOptions) Result {
		t.Helper()
		res, err := q.c.Retry(ctx, resultID, o)
		if err != nil {
			t.Fatalf("retry result %d: %v", resultID, err)
		}
		return res
	}

	// Limit 3: two other jobs of the group active, the retry is the third.
	export := wideExport{Account: "acct-1"}
	failedExport := q.fail(t, enqueue("app.Export", export, export), "ERRORED")
	secondExport := q.fail(t, enqueue("app.Export", export, export), "ERRORED")
	enqueue("app.Export", export, export)
	enqueue("app.Export", export, export)
	if res := retry(failedExport, RetryOptions{}); res.Inserted() {
		t.Fatal("the legacy reading (limit 1) admitted a retry into a group with two active jobs")
	}
	if res := retry(failedExport, RetryOptions{Classes: classes}); !res.Inserted() {
		t.Fatalf("a limit-3 class's retry with two active jobs was refused: %+v", res.Skipped)
	}
	if res := retry(secondExport, RetryOptions{Classes: classes}); res.Inserted() || res.Skipped.Limit != 3 || res.Skipped.Active != 3 {
		t.Fatalf("a retry that would be the fourth active export: %+v", res)
	}

	// Unlimited keyed: the group's other job does not block the retry.
	sync := freeSync{Account: "acct-2"}
	failedSync := q.fail(t, enqueue("app.Sync", sync, sync), "LOST")
	enqueue("app.Sync", sync, sync)
	if res := retry(failedSync, RetryOptions{Classes: classes}); !res.Inserted() {
		t.Fatalf("an unlimited class's retry was refused: %+v", res.Skipped)
	}

	// Legacy job type: limit 1 read from its UniqueKey, as Enqueue reads it.
	mail := legacyMail{To: "a@example.com"}
	failedMail := q.fail(t, enqueue("app.Mail", mail, mail), "ERRORED")
	enqueue("app.Mail", mail, mail)
	if res := retry(failedMail, RetryOptions{Classes: classes}); res.Inserted() || res.Skipped.Limit != 1 {
		t.Fatalf("a legacy job's retry next to an active job of its key: %+v", res)
	}

	// A scheduled occurrence of the unlimited class keeps limit 1.
	occurrence := Scheduled(sync, time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC))
	failedOccurrence := q.fail(t, enqueue("app.Sync", occurrence, sync), "ERRORED")
	enqueue("app.Sync", occurrence, sync)
	if res := retry(failedOccurrence, RetryOptions{Classes: classes}); res.Inserted() || res.Skipped.Key != occurrence.Key || res.Skipped.Limit != 1 {
		t.Fatalf("a scheduled occurrence's retry: %+v", res)
	}

	// A class the registry does not name: the legacy reading.
	other := q.fail(t, enqueue("app.Other", Limit("k", 5), nil), "ERRORED")
	enqueue("app.Other", Limit("k", 5), nil)
	if res := retry(other, RetryOptions{Classes: classes}); res.Inserted() || res.Skipped.Limit != 1 {
		t.Fatalf("an unregistered class's retry: %+v", res)
	}

	// Parameters the class cannot decode: an error, nothing retried.
	bad := q.fail(t, enqueue("app.Export", wideExport{Account: "acct-9"}, map[string]int{"Account": 7}), "ERRORED")
	if _, err := q.c.Retry(ctx, bad, RetryOptions{Classes: classes}); !errors.Is(err, ErrInvalidJob) {
		t.Fatalf("undecodable parameters: %v, want ErrInvalidJob", err)
	}
	if link := q.retryLink(t, bad); link != nil {
		t.Fatalf("the undecodable result was linked to a retry %s", *link)
	}
}

package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

// The demo's job classes and their job types: the shop of the example
// module in example.txtar, as its workers would enqueue them.
const (
	legacyClass    = "shop.jobs.ChargeCard"
	classWideClass = "shop.jobs.RebuildSearchIndex"
	perKeyClass    = "shop.jobs.SyncAccount"
	perKeyKey      = "account-7"
	perKeyLimit    = 3
	retryClass     = "shop.jobs.SendEmail"
	retryKey       = "digest-weekly"
	scheduledClass = "shop.jobs.NightlyReport"
)

// chargeCard is an old job type: UniqueKey only, read as limit 1.
type chargeCard struct{ Order int }

func (j chargeCard) UniqueKey() string { return fmt.Sprintf("order-%d", j.Order) }

// rebuildSearchIndex runs at most twice at once, whatever its key.
type rebuildSearchIndex struct{}

func (rebuildSearchIndex) ConcurrencyLimit() (int, bool) { return 2, true }

// syncAccount runs at most three times at once per account.
type syncAccount struct{ Account int }

func (j syncAccount) ConcurrencyKey() string      { return fmt.Sprintf("account-%d", j.Account) }
func (syncAccount) ConcurrencyLimit() (int, bool) { return perKeyLimit, true }

// nightlyReport is scheduled; each occurrence gets its own key.
type nightlyReport struct{}

func (nightlyReport) ConcurrencyKey() string { return "nightly-report" }

// enqueueCase enqueues one job and checks the outcome the demo expects.
func (d *demo) enqueueCase(ctx context.Context, job compat.Job, wantInserted bool) (compat.Result, error) {
	res, err := d.client.Enqueue(ctx, job)
	if err != nil {
		return res, fmt.Errorf("enqueue %s: %w", job.Class, err)
	}
	group := layout.GroupName(job.Class, compat.IdentityOf(job.Value).Key)
	if s := res.Skipped; s != nil {
		fmt.Fprintf(d.out, "    skipped   %s: %d of %d active\n", s.Group, s.Active, s.Limit)
	} else {
		d.demoRows++
		fmt.Fprintf(d.out, "    admitted  %s -> request %d\n", group, res.ID)
	}
	if res.Inserted() != wantInserted {
		return res, fmt.Errorf("enqueue %s: inserted=%v, want %v", group, res.Inserted(), wantInserted)
	}
	return res, nil
}

// enqueue is step 3.
func (d *demo) enqueue(ctx context.Context) error {
	fmt.Fprintf(d.out, "  an old job type with only UniqueKey() (read as limit 1), twice:\n")
	for i, want := range []bool{true, false} {
		if _, err := d.enqueueCase(ctx, compat.Job{Class: legacyClass, Value: chargeCard{Order: 42}, Args: map[string]int{"order_id": 42, "try": i}}, want); err != nil {
			return err
		}
	}

	fmt.Fprintf(d.out, "  a class-wide limit of 2 (no key), three times:\n")
	for _, want := range []bool{true, true, false} {
		if _, err := d.enqueueCase(ctx, compat.Job{Class: classWideClass, Value: rebuildSearchIndex{}}, want); err != nil {
			return err
		}
	}

	fmt.Fprintf(d.out, "  a per-key limit of %d, four times:\n", perKeyLimit)
	for i := range perKeyLimit + 1 {
		res, err := d.enqueueCase(ctx, compat.Job{Class: perKeyClass, Value: syncAccount{Account: 7}, Args: map[string]int{"account_id": 7}}, i < perKeyLimit)
		if err != nil {
			return err
		}
		if res.Inserted() {
			d.perKey = append(d.perKey, perKeyJob{id: res.ID, uuid: res.UUID})
		}
	}

	if err := d.retry(ctx); err != nil {
		return err
	}

	occurrence := time.Now().Truncate(time.Minute).Add(time.Minute)
	fmt.Fprintf(d.out, "  the %s UTC occurrence of a schedule, enqueued by two schedulers:\n", occurrence.UTC().Format("15:04"))
	for _, want := range []bool{true, false} {
		job := compat.Job{Class: scheduledClass, Value: compat.Scheduled(nightlyReport{}, occurrence), StartAt: occurrence}
		if _, err := d.enqueueCase(ctx, job, want); err != nil {
			return err
		}
	}
	return nil
}

// retry shows a failed job's retry going through admission.
func (d *demo) retry(ctx context.Context) error {
	// A job failed: plain-jobs' worker wrote its result row.
	var resultID int64
	err := d.pool.QueryRow(ctx, `INSERT INTO `+d.l.Table(d.l.ResultsTable)+` (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key,
	started_at, job_request_uuid, job_process_uuid, ended_at, error, status)
VALUES (now() - interval '1 minute', gen_random_uuid(), $1, '{"to": "team@example.com"}', 0, 'demo', 'default', 3, 0, $2,
	now() - interval '1 minute', gen_random_uuid(), gen_random_uuid(), now(), 'smtp: connection refused', 'ERRORED')
RETURNING id`, retryClass, retryKey).Scan(&resultID)
	if err != nil {
		return fmt.Errorf("write a failed job's result: %w", err)
	}
	d.demoRows++
	fmt.Fprintf(d.out, "  a failed job (result %d: %s, key %q, ERRORED, 3 retries allowed), retried:\n", resultID, retryClass, retryKey)
	res, err := d.client.Retry(ctx, resultID, compat.RetryOptions{})
	if err != nil {
		return fmt.Errorf("retry result %d: %w", resultID, err)
	}
	if !res.Inserted() {
		return fmt.Errorf("retry of result %d was skipped: %d of %d active in %s", resultID, res.Skipped.Active, res.Skipped.Limit, res.Skipped.Group)
	}
	d.demoRows++
	var attempt int
	var in time.Duration
	err = d.pool.QueryRow(ctx, `SELECT retry_attempt, extract(epoch FROM start_at - now())::float8 * interval '1 second' FROM `+d.l.Table(d.l.RequestsTable)+` WHERE id = $1`, res.ID).Scan(&attempt, &in)
	if err != nil {
		return fmt.Errorf("read retry request %d: %w", res.ID, err)
	}
	fmt.Fprintf(d.out, "    admitted  %s -> request %d, retry_attempt %d, starts in %s\n", layout.GroupName(retryClass, retryKey), res.ID, attempt, in.Round(time.Second))
	if attempt != 1 {
		return fmt.Errorf("retry request %d has retry_attempt %d, want 1", res.ID, attempt)
	}
	_, err = d.client.Retry(ctx, resultID, compat.RetryOptions{})
	if !errors.Is(err, compat.ErrNotRetryable) {
		return fmt.Errorf("a second retry of result %d: want ErrNotRetryable, got %v", resultID, err)
	}
	fmt.Fprintf(d.out, "    again     not retryable: the result has its retry already\n")
	return nil
}

// runUnderSlots is step 4.
func (d *demo) runUnderSlots(ctx context.Context) error {
	slots, err := compat.NewSlots(compat.Pgx(d.pool), d.l.Layout, compat.SlotsOptions{})
	if err != nil {
		return err
	}
	group := layout.GroupName(perKeyClass, perKeyKey)
	fmt.Fprintf(d.out, "  %d workers run the %d jobs of %s, each under a slot lease:\n", len(d.perKey), len(d.perKey), group)

	type outcome struct {
		ran bool
		err error
	}
	started := make(chan struct{}, len(d.perKey))
	hold := make(chan struct{})
	done := make(chan outcome, len(d.perKey))
	for i, job := range d.perKey {
		w, err := compat.NewWorker(slots, fmt.Sprintf("worker-%d", i+1), 30*time.Second)
		if err != nil {
			return err
		}
		go func() {
			ran, err := w.Run(ctx, group, perKeyLimit, job.uuid, func(ctx context.Context) error {
				started <- struct{}{}
				select {
				case <-hold:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			})
			done <- outcome{ran, err}
		}()
	}
	running, finished := 0, 0
	var failure error
	for running < len(d.perKey) && failure == nil {
		select {
		case <-started:
			running++
		case o := <-done:
			finished++
			failure = fmt.Errorf("a worker did not run its job (ran=%v): %v", o.ran, o.err)
		}
	}
	if failure == nil {
		failure = d.whileRunning(ctx, slots, group)
	}
	close(hold)
	for ; finished < len(d.perKey); finished++ {
		if o := <-done; (!o.ran || o.err != nil) && failure == nil {
			failure = fmt.Errorf("a worker's job: ran=%v, err=%v", o.ran, o.err)
		}
	}
	if failure != nil {
		return failure
	}
	fmt.Fprintf(d.out, "  the jobs finished; each worker released its slot\n")
	return d.maintenance(ctx, slots, group)
}

// whileRunning shows the group's status with every slot held, and a fourth
// acquisition that finds them busy.
func (d *demo) whileRunning(ctx context.Context, slots *compat.Slots, group string) error {
	st, err := slots.Status(ctx, group)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  $ migrate-unique concurrency status %s\n", group)
	d.o.PrintStatus(&indent{w: d.out, prefix: "    "}, []compat.GroupStatus{st})
	fmt.Fprintf(d.out, "  the same in a browser, with the operator's switches (this opens nothing; the demo ends with down, so keep its database with --keep and run up on it again first):\n  $ migrate-unique concurrency serve --database '%s'\n", pgurl.Redact(d.url))
	if st.Limit != perKeyLimit || st.Active != len(d.perKey) {
		return fmt.Errorf("status of %s: limit %d, %d active; want limit %d, %d active", group, st.Limit, st.Active, perKeyLimit, len(d.perKey))
	}
	lease, acquired, err := slots.Acquire(ctx, group, perKeyLimit, "another-job", "worker-4", 30*time.Second)
	if err != nil {
		return err
	}
	if acquired {
		_ = slots.Release(ctx, lease)
		return fmt.Errorf("a fourth acquisition of %s got slot %d while %d were held", group, lease.Slot, perKeyLimit)
	}
	fmt.Fprintf(d.out, "  a 4th acquisition: busy, no slot handed out (busy is not a failure: compat.Rescheduler puts such a job back without counting an attempt)\n")
	return nil
}

// maintenance sets the group's limit to 0 and shows that nothing is
// admitted or started, then clears the override.
func (d *demo) maintenance(ctx context.Context, slots *compat.Slots, group string) error {
	const reason = "demo: maintenance"
	fmt.Fprintf(d.out, "  $ migrate-unique concurrency set %s --limit 0 --reason %q\n", group, reason)
	if err := slots.SetLimit(ctx, group, 0, reason); err != nil {
		return err
	}
	res, err := d.client.Enqueue(ctx, compat.Job{Class: perKeyClass, Value: syncAccount{Account: 7}})
	if err != nil {
		return err
	}
	if s := res.Skipped; s == nil || s.Limit != 0 {
		return fmt.Errorf("enqueue under a limit override of 0: want skipped at limit 0, got %+v", res)
	}
	fmt.Fprintf(d.out, "    enqueue: skipped, %s is at limit %d\n", res.Skipped.Group, res.Skipped.Limit)
	w, err := compat.NewWorker(slots, "worker-1", 30*time.Second)
	if err != nil {
		return err
	}
	ran, err := w.Run(ctx, group, perKeyLimit, d.perKey[0].uuid, func(context.Context) error { return nil })
	if err != nil {
		return err
	}
	if ran {
		return fmt.Errorf("a job of %s ran under a limit override of 0", group)
	}
	fmt.Fprintf(d.out, "    worker:  busy, no slot handed out while the limit is 0\n")
	if had, err := slots.ClearLimit(ctx, group); err != nil || !had {
		return fmt.Errorf("clear the override of %s: had=%v, err=%v", group, had, err)
	}
	if _, err := slots.CleanupExpired(ctx); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  $ migrate-unique concurrency set %s --clear: the code's limit %d applies again\n", group, perKeyLimit)
	return nil
}

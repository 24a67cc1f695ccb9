package dashboard

import (
	"context"
	"crypto/subtle"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

// A switch is posted twice: step "review" shows what it does and the
// same command line, step "apply" does it. Both need the session, the CSRF
// token and a same-origin request.

// switchRequest is a switch's form, checked.
type switchRequest struct {
	Action string // set, clear, pause, resume, release
	Group  string
	Class  string
	Limit  int
	Reason string
	Slot   int
	// Token is the fencing token of the slot the operator saw: a release
	// is refused if the slot was acquired again since.
	Token int64
}

func (s *Server) parseSwitch(r *http.Request) (switchRequest, error) {
	sw := switchRequest{Action: r.PostFormValue("action"), Group: r.PostFormValue("group"), Class: r.PostFormValue("class"), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	bad := func(format string, args ...any) (switchRequest, error) {
		return sw, &userError{msg: fmt.Sprintf(format, args...)}
	}
	if strings.IndexFunc(sw.Reason, groupstatus.IsControl) >= 0 || !utf8.ValidString(sw.Reason) {
		return bad("the reason contains a control character or invalid UTF-8; give one line of plain text")
	}
	switch sw.Action {
	case "set":
		n, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("limit")), 10, 64)
		switch {
		case err != nil:
			return bad("limit %q: give a whole number, 0 (block the group) or more", r.PostFormValue("limit"))
		case n < 0:
			return bad("limit %d: a limit is 0 (block the group) or more", n)
		case n > math.MaxInt32:
			return bad("limit %d: at most %d (clear the override for the code's limit)", n, math.MaxInt32)
		}
		sw.Limit = int(n)
		return sw, groupstatus.CheckGroupName(sw.Group)
	case "clear":
		return sw, groupstatus.CheckGroupName(sw.Group)
	case "pause", "resume":
		// group, when given, is the page to go back to.
		if sw.Group != "" {
			if err := groupstatus.CheckGroupName(sw.Group); err != nil {
				return sw, err
			}
		}
		return sw, groupstatus.CheckClassName(sw.Class)
	case "release":
		slot, err := strconv.ParseInt(r.PostFormValue("slot"), 10, 32)
		if err != nil || slot < 0 {
			return bad("slot %q: give a slot number from 0 to %d", r.PostFormValue("slot"), math.MaxInt32)
		}
		token, err := strconv.ParseInt(r.PostFormValue("token"), 10, 64)
		if err != nil {
			return bad("token %q: give the slot's fencing token as the group's page shows it", r.PostFormValue("token"))
		}
		sw.Slot, sw.Token = int(slot), token
		return sw, groupstatus.CheckGroupName(sw.Group)
	}
	return bad("unknown switch %q: set, clear, pause, resume or release", sw.Action)
}

// command is the CLI command line that does the same.
func (sw switchRequest) command() string {
	a := groupstatus.ShellArg
	switch sw.Action {
	case "set":
		c := fmt.Sprintf("migrate-unique concurrency set %s --limit %d", a(sw.Group), sw.Limit)
		if sw.Reason != "" {
			c += " --reason " + a(sw.Reason)
		}
		return c
	case "clear":
		return "migrate-unique concurrency set " + a(sw.Group) + " --clear"
	case "pause":
		c := "migrate-unique concurrency pause " + a(sw.Class)
		if sw.Reason != "" {
			c += " --reason " + a(sw.Reason)
		}
		return c
	case "resume":
		return "migrate-unique concurrency resume " + a(sw.Class)
	case "release":
		return fmt.Sprintf("migrate-unique concurrency release %s %d --force", a(sw.Group), sw.Slot)
	}
	return ""
}

// describe says what the switch will do, for the confirmation page.
func (sw switchRequest) describe(g groupstatus.Group) string {
	switch sw.Action {
	case "set":
		d := fmt.Sprintf("Set an operator override of the limit of group %s to %d", sw.Group, sw.Limit)
		if sw.Reason != "" {
			d += fmt.Sprintf(" (reason: %s)", sw.Reason)
		}
		d += ". It wins over the code's limit for admission and execution at once, without a deploy."
		switch _, key := layout.SplitGroupName(sw.Group); {
		case sw.Limit == 0 && key == "":
			d += fmt.Sprintf(" Limit 0 is the maintenance switch: the class's keyless jobs (group %s) are no longer admitted or started; its keyed groups (%s::KEY) go on. Pausing the class stops them all.", sw.Group, sw.Group)
		case sw.Limit == 0:
			d += " Limit 0 is the maintenance switch: no job of this group is admitted or started."
		}
		if held := g.SlotsHeld; held > sw.Limit {
			d += fmt.Sprintf(" %d slot(s) are held now: holders at or above slot %d finish their jobs, and no slot at or above it is handed out.", held, sw.Limit)
		}
		return d
	case "clear":
		return fmt.Sprintf("Remove the operator override of group %s: the limit its code asks for applies again, for admission and execution.", sw.Group)
	case "pause":
		return fmt.Sprintf("Pause class %s: no job of the class is admitted or started, neither its keyless jobs (group %s) nor any keyed group (%s::KEY, every key). Jobs holding a slot finish; pending jobs stay queued. Groups' own overrides are kept.", sw.Class, sw.Class, sw.Class)
	case "resume":
		return fmt.Sprintf("Resume class %s: its groups are admitted and started again under their own limits (overrides and the code's).", sw.Class)
	case "release":
		d := fmt.Sprintf("Free slot %d of group %s", sw.Slot, sw.Group)
		for _, sl := range g.Slots {
			if sl.Slot != sw.Slot {
				continue
			}
			switch {
			case sl.Held:
				d += fmt.Sprintf(", held by job %s on worker %s (token %d, its lease is NOT expired: the job may still be running)", sl.JobID, dash(sl.WorkerID), sl.Token)
			case sl.Expired:
				d += fmt.Sprintf(", whose lease by job %s on worker %s (token %d) has expired", sl.JobID, dash(sl.WorkerID), sl.Token)
			default:
				d += " (it is free)"
			}
		}
		return d + ". The slot row is deleted: the old holder's token stops working, its extend and release fail with a lost lease and its worker cancels the job."
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (s *Server) switchPage(ctx context.Context, r *http.Request) (string, map[string]any, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return "", nil, &userError{msg: "the form could not be read: " + err.Error()}
	}
	switch {
	case s.o.ReadOnly:
		return "", nil, &httpError{status: http.StatusForbidden, msg: "this dashboard is read-only (--read-only): switches are refused"}
	case !sameOrigin(r):
		s.log.Printf("refused a cross-site switch from %s (Origin %q)", r.RemoteAddr, r.Header.Get("Origin"))
		return "", nil, &httpError{status: http.StatusForbidden, msg: "refused: the switch was not sent by a page of this dashboard (Origin check)"}
	case subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1:
		s.log.Printf("refused a switch without the form token from %s", r.RemoteAddr)
		return "", nil, &httpError{status: http.StatusForbidden, msg: "refused: the switch's form token is missing or stale; reload the page and try again"}
	}
	sw, err := s.parseSwitch(r)
	if err != nil {
		return "", nil, err
	}
	back := "/"
	if sw.Group != "" {
		back = "/group?" + url.Values{"name": {sw.Group}}.Encode()
	}
	var msg string
	apply := r.PostFormValue("step") == "apply"
	err = s.db(ctx, func(conn pgurl.Handle, slots *compat.Slots) error {
		var g groupstatus.Group
		if sw.Group != "" {
			st, err := slots.Status(ctx, sw.Group)
			if err != nil {
				return err
			}
			g = groupstatus.FromRuntime([]compat.GroupStatus{st}, nil).Groups[0]
		}
		if !apply {
			msg = sw.describe(g)
			return nil
		}
		msg, err = s.apply(ctx, conn, slots, sw, g)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	if !apply {
		return "confirm.html", map[string]any{"Title": "Confirm", "Text": msg, "Command": sw.command(), "S": sw, "Back": back}, nil
	}
	s.log.Printf("%s from %s: %s", sw.command(), r.RemoteAddr, strconv.QuoteToGraphic(msg))
	return "done.html", map[string]any{"Title": "Done", "Text": msg, "Command": sw.command(), "Back": back}, nil
}

// apply does the switch with the CLI's calls and checks, and returns what
// it did.
func (s *Server) apply(ctx context.Context, conn pgurl.Handle, slots *compat.Slots, sw switchRequest, g groupstatus.Group) (string, error) {
	o := slots.Overrides()
	schema := s.o.Layout.Schema
	switch sw.Action {
	case "set":
		if err := groupstatus.CheckKeyLength(ctx, conn, schema, sw.Group); err != nil {
			return "", err
		}
		known, err := groupstatus.GroupKnown(ctx, conn, schema, sw.Group)
		if err != nil {
			return "", err
		}
		if !known {
			return "", &userError{msg: fmt.Sprintf("group %q has no job, no slot and no override in schema %q; nothing was changed (the CLI's 'concurrency set --force' sets a group whose jobs are not enqueued yet)", sw.Group, schema)}
		}
		if err := o.SetLimit(ctx, sw.Group, sw.Limit, sw.Reason); err != nil {
			return "", err
		}
		msg := fmt.Sprintf("group %s: limit %d (override)", sw.Group, sw.Limit)
		if st, err := slots.Status(ctx, sw.Group); err == nil && st.OverLimit > 0 {
			msg += fmt.Sprintf("; %d holder(s) over the new limit finish their jobs", st.OverLimit)
		}
		return msg, nil
	case "clear":
		had, err := o.ClearLimit(ctx, sw.Group)
		if err != nil {
			return "", err
		}
		if !had {
			return fmt.Sprintf("group %s had no override; nothing changed", sw.Group), nil
		}
		return fmt.Sprintf("cleared the override of group %s; the code's limit applies", sw.Group), nil
	case "pause":
		already, err := o.PauseClass(ctx, sw.Class, sw.Reason)
		if err != nil {
			return "", err
		}
		if already {
			return fmt.Sprintf("class %s was already paused (reason updated)", sw.Class), nil
		}
		return fmt.Sprintf("class %s paused: no job of the class is admitted or started", sw.Class), nil
	case "resume":
		had, err := o.ResumeClass(ctx, sw.Class)
		if err != nil {
			return "", err
		}
		if !had {
			return fmt.Sprintf("class %s was not paused; nothing changed", sw.Class), nil
		}
		return fmt.Sprintf("class %s resumed: its groups are admitted and started again under their own limits", sw.Class), nil
	case "release":
		var found bool
		for _, sl := range g.Slots {
			if sl.Slot == sw.Slot {
				found = true
				if sl.Token != sw.Token {
					return "", &userError{msg: fmt.Sprintf("slot %d of group %s changed since the page showed it (token %d, now %d): nothing was freed; look at the group again", sw.Slot, sw.Group, sw.Token, sl.Token)}
				}
			}
		}
		if !found {
			return "", &userError{msg: fmt.Sprintf("group %s has no slot %d; nothing was freed", sw.Group, sw.Slot)}
		}
		l, err := slots.ForceRelease(ctx, sw.Group, sw.Slot)
		if err != nil {
			return "", err
		}
		if l.JobID == "" {
			return fmt.Sprintf("freed slot %d of group %s (it was not held)", l.Slot, l.Group), nil
		}
		return fmt.Sprintf("freed slot %d of group %s: job %s on worker %s, token %d, no longer valid", l.Slot, l.Group, l.JobID, dash(l.WorkerID), l.Token), nil
	}
	return "", fmt.Errorf("unknown switch %q", sw.Action)
}

// funcs are the templates' helpers.
var funcs = map[string]any{
	"when": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	},
	"rel": func(t *time.Time, now time.Time) string {
		if t == nil {
			return ""
		}
		d := t.Sub(now).Round(time.Second)
		if d < 0 {
			return (-d).String() + " ago"
		}
		return "in " + d.String()
	},
	"count": func(n *int64) string {
		if n == nil {
			return "?"
		}
		return strconv.FormatInt(*n, 10)
	},
	"dash": dash,
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
	"ts": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
}

package dashboard

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
)

// Row is one group of the groups page and of /api/groups.
type Row struct {
	Group string `json:"group"`
	Class string `json:"class"`
	Key   string `json:"key"`
	// Limit is the effective limit, "-" when nothing limits the group;
	// LimitSource is "code", "override", "class_pause" or "".
	Limit       string `json:"limit"`
	LimitSource string `json:"limit_source"`
	// Reason is the override's or the class pause's note.
	Reason string `json:"reason"`
	// Queued, Running and Active (their sum) are null when the queue's
	// tables could not be counted.
	Queued    *int64 `json:"queued"`
	Running   *int64 `json:"running"`
	Active    *int64 `json:"active"`
	SlotsHeld int    `json:"slots_held"`
	Expired   int    `json:"slots_expired"`
	OverLimit int    `json:"slots_over_limit"`
	// Rescheduled counts the group's most rescheduled jobs, as status
	// lists them (at most 10).
	Rescheduled int `json:"rescheduled"`
	// Pressure is active jobs per slot of the limit, as text ("250%",
	// "blocked" for jobs behind a limit of 0, "-" without a limit).
	Pressure string `json:"pressure"`
	// URL is the group's page.
	URL string `json:"url"`

	pressure float64
}

// GroupsView is the groups page's data, and /api/groups's answer.
type GroupsView struct {
	Rows []Row `json:"rows"`
	// Total counts the groups that pass the filter; Page (from 1) and
	// Pages page through them, PageSize at a time.
	Total    int `json:"total"`
	Page     int `json:"page"`
	Pages    int `json:"pages"`
	PageSize int `json:"page_size"`
	// Class and Prefix are the filter.
	Class  string `json:"class"`
	Prefix string `json:"prefix"`
	// Classes lists every class that has a group, for the filter.
	Classes       []string       `json:"classes"`
	PausedClasses []compat.Pause `json:"paused_classes"`
	QueueNote     string         `json:"queue_note"`
	// At is when the status was read.
	At time.Time `json:"at"`
}

// rowOf turns a group's summary into a page row.
func rowOf(g groupstatus.Summary) Row {
	r := Row{Group: g.Group, Class: g.Class, Key: g.Key, Limit: "-", LimitSource: g.LimitSource,
		Queued: g.Queued, Running: g.Running, SlotsHeld: g.SlotsHeld, Expired: g.SlotsExpired, OverLimit: g.SlotsOverLimit,
		Rescheduled: g.RescheduledJobs}
	switch g.LimitSource {
	case "override":
		r.Reason = g.OverrideReason
	case "class_pause":
		r.Reason = g.PauseReason
	}
	if g.Queued != nil && g.Running != nil {
		n := *g.Queued + *g.Running
		r.Active = &n
	}
	active := float64(r.SlotsHeld)
	if r.Active != nil {
		active = float64(*r.Active)
	}
	r.Pressure = "-"
	if g.Limit != nil {
		r.Limit = strconv.Itoa(*g.Limit)
		switch {
		case *g.Limit > 0:
			r.pressure = active / float64(*g.Limit)
			r.Pressure = strconv.FormatFloat(100*r.pressure, 'f', 0, 64) + "%"
		case active > 0:
			r.pressure, r.Pressure = math.Inf(1), "blocked"
		default:
			r.Pressure = "0%"
		}
	}
	return r
}

// groupURL is a group's page.
func groupURL(group string) string { return "/group?" + url.Values{"name": {group}}.Encode() }

// sortByPressure orders rows as the groups page shows them: most active
// jobs per slot first (jobs behind a limit of 0 before all), then most
// holders over the limit, most active jobs, and by name (a group's name
// is unique: the order is total). It sorts pointers: a row is large, and
// every group is sorted to show one page.
func sortByPressure(rows []*Row) {
	active := func(r *Row) int64 {
		if r.Active != nil {
			return *r.Active
		}
		return int64(r.SlotsHeld)
	}
	slices.SortFunc(rows, func(a, b *Row) int {
		switch {
		case a.pressure != b.pressure:
			return -cmp.Compare(a.pressure, b.pressure)
		case a.OverLimit != b.OverLimit:
			return -cmp.Compare(a.OverLimit, b.OverLimit)
		case active(a) != active(b):
			return -cmp.Compare(active(a), active(b))
		}
		return strings.Compare(a.Group, b.Group)
	})
}

// readGroups reads every group's summary (the groups, limits and counts
// `concurrency status --json` shows, counted by PostgreSQL in a fixed
// number of statements: groupstatus.ReadSummaries), filters, sorts and
// pages it. Only the page's rows are rendered.
func (s *Server) readGroups(ctx context.Context, r *http.Request) (GroupsView, error) {
	q := r.URL.Query()
	v := GroupsView{Class: q.Get("class"), Prefix: q.Get("prefix"), PageSize: s.o.PageSize, Page: 1}
	if p, err := strconv.Atoi(q.Get("page")); err == nil && p > 1 {
		v.Page = p
	}
	var rep groupstatus.SummaryReport
	err := s.db(ctx, func(conn pgurl.Handle, slots *compat.Slots) error {
		var err error
		rep, err = groupstatus.ReadSummaries(ctx, conn, slots, s.o.Layout)
		return err
	})
	if err != nil {
		return v, err
	}
	v.At = time.Now().UTC()
	v.PausedClasses, v.QueueNote = rep.PausedClasses, rep.QueueNote
	classes := map[string]bool{}
	all := make([]Row, 0, len(rep.Groups))
	for _, g := range rep.Groups {
		classes[g.Class] = true
		if v.Class != "" && g.Class != v.Class || v.Prefix != "" && !strings.HasPrefix(g.Key, v.Prefix) {
			continue
		}
		all = append(all, rowOf(g))
	}
	rows := make([]*Row, len(all))
	for i := range all {
		rows[i] = &all[i]
	}
	for c := range classes {
		v.Classes = append(v.Classes, c)
	}
	sort.Strings(v.Classes)
	sortByPressure(rows)
	v.Total = len(rows)
	v.Pages = max(1, (v.Total+v.PageSize-1)/v.PageSize)
	v.Page = min(v.Page, v.Pages)
	from := (v.Page - 1) * v.PageSize
	v.Rows = make([]Row, 0, v.PageSize)
	for _, r := range rows[from:min(from+v.PageSize, len(rows))] {
		r.URL = groupURL(r.Group)
		v.Rows = append(v.Rows, *r)
	}
	return v, nil
}

func (s *Server) groupsPage(ctx context.Context, r *http.Request) (string, map[string]any, error) {
	v, err := s.readGroups(ctx, r)
	if err != nil {
		return "", nil, err
	}
	return "groups.html", map[string]any{"Title": "Concurrency groups", "V": v, "RefreshMillis": s.o.Refresh.Milliseconds(),
		"Prev": pageURL(v, v.Page-1), "Next": pageURL(v, v.Page+1)}, nil
}

// pageURL is the groups page's link to page p with the same filter, or ""
// past either end.
func pageURL(v GroupsView, p int) string {
	if p < 1 || p > v.Pages {
		return ""
	}
	q := url.Values{}
	if v.Class != "" {
		q.Set("class", v.Class)
	}
	if v.Prefix != "" {
		q.Set("prefix", v.Prefix)
	}
	q.Set("page", strconv.Itoa(p))
	return "/?" + q.Encode()
}

// apiGroups answers the groups page's refresh: the same view as JSON.
func (s *Server) apiGroups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.o.QueryTimeout)
	defer cancel()
	v, err := s.readGroups(ctx, r)
	if err != nil {
		s.log.Printf("GET /api/groups: %v", err)
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, v)
}

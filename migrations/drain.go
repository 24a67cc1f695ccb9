package migrations

// drainedGroup is one override down --drain set: the group, and the
// override it replaced (Had false: there was none).
type drainedGroup struct {
	Group  string `json:"group"`
	Had    bool   `json:"had"`
	Limit  int    `json:"limit"`
	Reason string `json:"reason"`
}

package lockid

import "testing"

func TestForMatchesPlainJobs(t *testing.T) {
	tests := []struct {
		class, key string
		want       int64
	}{
		{"app.jobs.ChargeJob", "charge-7", 7527929927103732752},
		{"app.jobs.ChargeJob", "", -744096600792446844},
	}
	for _, tt := range tests {
		if got := For(tt.class, tt.key); got != tt.want {
			t.Errorf("For(%q, %q) = %d, want %d", tt.class, tt.key, got, tt.want)
		}
	}
}

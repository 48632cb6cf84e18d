package rsocket

import (
	"testing"
	"time"
)

// TestConfigWaitSpinMax: a connection's CQ gets DefaultWaitSpinMax unless
// Config says otherwise (or GOVERBS_WAIT_SPIN_MAX is set: then 0 passes
// through for uverbs to read it).
func TestConfigWaitSpinMax(t *testing.T) {
	want := DefaultWaitSpinMax
	if envWaitSpinMax {
		want = 0
	}
	for _, tc := range []struct {
		name string
		c    *Config
		want time.Duration
	}{
		{"nil", nil, want},
		{"zero", &Config{}, want},
		{"set", &Config{WaitSpinMax: 3 * time.Millisecond}, 3 * time.Millisecond},
		{"off", &Config{WaitSpinMax: -1}, -1},
	} {
		if got := cmConfig(tc.c.sizes(), false).WaitSpinMax; got != tc.want {
			t.Errorf("%s: the CQ's WaitSpinMax is %v, want %v", tc.name, got, tc.want)
		}
	}
}

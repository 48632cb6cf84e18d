package rsocket

import (
	"testing"
	"time"
)

// TestConfigWaitSpinMax: Config.WaitSpinMax reaches the connection's CQ
// options as it is (0 leaves the choice to uverbs: its environment
// variable, or no growth).
func TestConfigWaitSpinMax(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *Config
		want time.Duration
	}{
		{"nil", nil, 0},
		{"zero", &Config{}, 0},
		{"set", &Config{WaitSpinMax: 16 * time.Millisecond}, 16 * time.Millisecond},
		{"off", &Config{WaitSpinMax: -1}, -1},
	} {
		if got := cmConfig(tc.c.settings(), false).WaitSpinMax; got != tc.want {
			t.Errorf("%s: the CQ's WaitSpinMax is %v, want %v", tc.name, got, tc.want)
		}
	}
}

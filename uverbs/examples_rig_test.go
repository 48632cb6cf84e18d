package uverbs_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// TestExamplesRig runs the package's examples on the rig's rxe0: they have
// no Output lines (a host has no device), so go test would only compile
// them. An example that fails calls log.Fatal, which fails this binary.
func TestExamplesRig(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "rxe0")
	for name, ex := range map[string]func(){
		"Devices": ExampleDevices, "PD_RegMR": ExamplePD_RegMR, "CQ_Wait": ExampleCQ_Wait, "Recorder": ExampleRecorder,
	} {
		t.Run(name, func(t *testing.T) { ex() })
	}
}

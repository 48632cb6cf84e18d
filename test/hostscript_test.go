package test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// hostScript returns bash and the absolute path of the rig script rel (under
// test/rig) for a test of the rig's scripts, which runs in the host unit tier
// only: the guest has no test/rig, and these tests run the scripts with fakes.
func hostScript(t *testing.T, rel string) (bash, path string) {
	t.Helper()
	if rigtest.InRig() {
		t.Skip("host unit tier: the rig's host scripts are not in the guest")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash: the rig's scripts are bash")
	}
	path, err = filepath.Abs(filepath.Join("rig", rel))
	if err != nil {
		t.Fatal(err)
	}
	return bash, path
}

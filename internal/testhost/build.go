package testhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BinDirEnv names the variable through which `make test` hands every test package one build of the
// module's commands: a directory holding specsweep and sglangsim, built by the same go and GOFLAGS
// just before go test runs. Without it each test process built its own, about a dozen links a run
// (docs/development.md, "Tests").
const BinDirEnv = "SPECSWEEP_TEST_BINDIR"

// BuildCommand puts a binary of the module's cmd/name at dst: a hard link to (or a copy of) the
// one in $SPECSWEEP_TEST_BINDIR when that is set, else what `go build -o dst` makes. With go build
// flags (-race) it always builds.
func BuildCommand(name, dst string, flags ...string) error {
	if dir := os.Getenv(BinDirEnv); dir != "" && len(flags) == 0 {
		src := filepath.Join(dir, name)
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("testhost: %s from %s: %w", name, BinDirEnv, err)
		}
		if os.Link(src, dst) == nil {
			return nil
		}
		if err := copyFile(src, dst, 0o755); err != nil {
			return fmt.Errorf("testhost: cannot copy %s to %s: %w", src, dst, err)
		}
		return nil
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", append(append([]string{"build", "-o", dst}, flags...), "./cmd/"+name)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return nil
}

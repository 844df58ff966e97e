//go:build integration

package realmachines

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"

	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveCommands()
	os.Exit(code)
}

// commandTimeout bounds one command; the rollouts bound themselves with --timeout, well within.
const commandTimeout = 20 * time.Minute

// cliAt runs the built manila-setup against one cluster and one cloud named by flags rather than
// by the environment, as a user with several clusters does: each test has its own.
type cliAt struct{ kubeconfig, cloudsFile, cloud string }

// run returns the command's exit code, standard output and standard error.
func (c cliAt) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	bin := testenv.Command(t, "github.com/manila-setup/manila-setup/cmd/manila-setup", "")
	flags := []string{"--kubeconfig=" + c.kubeconfig, "--os-client-config-file=" + c.cloudsFile, "--os-cloud=" + c.cloud}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(flags, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit) && ctx.Err() == nil:
		return exit.ExitCode(), out.String(), errOut.String()
	default:
		t.Fatalf("manila-setup %s: %v (bound %s)\n%s%s", strings.Join(args, " "), err, commandTimeout, out.String(), errOut.String())
		return -1, "", ""
	}
}

// must runs the command and fails the test unless it exits with want; it returns its output.
func (c cliAt) must(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, out, errOut := c.run(t, args...)
	if code != want {
		t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
	}
	return out + errOut
}

// liveMachines are the Machines of a MachineSet not being deleted.
func liveMachines(t *testing.T, ctx context.Context, mc machineclient.Interface, set string) []machinev1beta1.Machine {
	t.Helper()
	live, err := machinectl.LiveMachines(ctx, mc, machinectl.MachineSetLabel+"="+set)
	if err != nil {
		t.Fatal(err)
	}
	return live
}

// nodeInternalIP is the Node's first InternalIP: its node IP.
func nodeInternalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

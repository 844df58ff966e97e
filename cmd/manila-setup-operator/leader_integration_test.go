//go:build integration

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// Two `manila-setup-operator start` processes on one host, with the same flags (a sandbox's and
// one started beside it): they must not share a leader identity. Exactly one leads (only it
// starts the controllers); killed without a chance to release the Lease, the other takes over
// within the lease duration.
func TestTwoOperatorsOnOneHost(t *testing.T) {
	api := testenv.NewAPIServer(t)
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	// The build first: on a machine busy with the rest of the suite it can take minutes, which
	// must not come out of the processes' time.
	bin := filepath.Join(t.TempDir(), "manila-setup-operator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// settle bounds each wait for a state; it only caps a failure.
	const settle = 2 * time.Minute
	const leaseDuration, renew, retry = 6 * time.Second, 4 * time.Second, time.Second
	type proc struct {
		cmd      *exec.Cmd
		log      *testenv.SyncBuffer
		identity string
	}
	start := func() *proc {
		p := &proc{log: &testenv.SyncBuffer{}}
		p.cmd = exec.CommandContext(ctx, bin, "start", "--kubeconfig", kubeconfig, "--namespace", "default",
			"--health-address", "", "--leader-elect-lease-duration", leaseDuration.String(),
			"--leader-elect-renew-deadline", renew.String(), "--leader-elect-retry-period", retry.String())
		p.cmd.Env = os.Environ()
		for k := range (&operator.Images{}).ImageEnv() {
			p.cmd.Env = append(p.cmd.Env, k+"=example.test/"+strings.ToLower(k)+":1")
		}
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
		return p
	}
	a, b := start(), start()
	identityRE := regexp.MustCompile(`leader election on Lease \S+ as "([^"]+)"`)
	for _, p := range []*proc{a, b} {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, settle, true, func(context.Context) (bool, error) {
			m := identityRE.FindStringSubmatch(p.log.String())
			if m != nil {
				p.identity = m[1]
			}
			return m != nil, nil
		}); err != nil {
			t.Fatalf("no identity logged:\n%s", p.log.String())
		}
	}
	if a.identity == b.identity {
		t.Fatalf("both processes use the identity %q", a.identity)
	}
	t.Logf("identities %q and %q", a.identity, b.identity)

	lease := func() *coordinationv1.Lease {
		l, err := api.Client.CoordinationV1().Leases("default").Get(ctx, operator.OperatorName+"-lock", metav1.GetOptions{})
		if err != nil {
			return &coordinationv1.Lease{}
		}
		return l
	}
	holder := func() string { return ptr.Deref(lease().Spec.HolderIdentity, "") }
	var leader, standby *proc
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, settle, true, func(context.Context) (bool, error) {
		switch holder() {
		case a.identity:
			leader, standby = a, b
		case b.identity:
			leader, standby = b, a
		}
		return leader != nil, nil
	}); err != nil {
		t.Fatalf("nobody leads (holder %q)", holder())
	}
	started := func(p *proc) bool {
		return strings.Contains(p.log.String(), "starting ") && strings.Contains(p.log.String(), " controllers (namespace")
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, settle, true, func(context.Context) (bool, error) {
		return started(leader), nil
	}); err != nil {
		t.Fatalf("the leader did not start its controllers:\n%s", leader.log)
	}
	// The standby tries every retry period, as the leader renews: over three renewals of the
	// leader's it had as many chances to start leading too, and must not have.
	for renewals, last := 0, lease().Spec.RenewTime; renewals < 3; {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, settle, true, func(context.Context) (bool, error) {
			l := lease()
			return l.Spec.RenewTime != nil && (last == nil || !l.Spec.RenewTime.Equal(last)), nil
		}); err != nil {
			t.Fatalf("the leader renewed the Lease %d times, not 3 (holder %q)", renewals, holder())
		}
		renewals, last = renewals+1, lease().Spec.RenewTime
	}
	if !started(leader) || started(standby) || holder() != leader.identity {
		t.Fatalf("leader started its controllers: %v, standby: %v\nleader log:\n%s\nstandby log:\n%s", started(leader), started(standby), leader.log, standby.log)
	}

	// SIGKILL: no release of the Lease, the standby must wait for it to expire.
	killed := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, settle, true, func(context.Context) (bool, error) {
		return holder() == standby.identity && started(standby), nil
	}); err != nil {
		t.Fatalf("the standby did not take over (holder %q):\n%s", holder(), standby.log)
	}
	// When it took over is what it wrote in the Lease, not when this test got to look (its
	// polls and the standby's start of its controllers are slowed by the load of the machine).
	acquired := lease().Spec.AcquireTime
	if acquired == nil {
		t.Fatalf("the Lease has no acquireTime after the takeover (holder %q)", holder())
	}
	took := acquired.Sub(killed)
	if took > leaseDuration+4*retry {
		t.Errorf("the standby took over %.1fs after the leader was killed, want within %s (lease %s)", took.Seconds(), leaseDuration+4*retry, leaseDuration)
	}
	t.Logf("the standby took over %.1fs after the leader was killed (lease %s)", took.Seconds(), leaseDuration)
}

// Command sandbox runs the long-lived cluster of `make demo` until it gets SIGTERM or SIGINT: a
// sim cluster (real kube-apiserver, etcd, kube-controller-manager and kube-scheduler; kwok
// nodes) shaped like a fresh OpenShift-on-OpenStack install, the Machine API stand-in, the
// manila-setup operator as a local process with the loopback cloud's credentials, and the
// controller side of the real Manila CSI driver (manila-csi-plugin and csi-provisioner), so that
// claims become real shares in the loopback Manila.
//
// It writes <dir>/kubeconfig, logs every component under <dir>, prints progress with timings,
// and writes <dir>/ready once everything is up. test/env/demo.sh starts it; demo-down.sh stops
// it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

type options struct {
	dir       string
	cli       string
	cloud     string
	infraID   string
	workers   int
	nodeDelay time.Duration
}

// t0 is the origin of the progress timings: $MANILA_SETUP_T0 (Unix seconds, set by up.sh so
// that its own lines and these count from the same start), else the start of this program.
var t0 = func() time.Time {
	if n, err := strconv.ParseInt(os.Getenv("MANILA_SETUP_T0"), 10, 64); err == nil {
		return time.Unix(n, 0)
	}
	return time.Now()
}()

func step(format string, args ...any) {
	fmt.Printf("[%4ds] %s\n", int(time.Since(t0).Seconds()), fmt.Sprintf(format, args...))
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "", "folder for the kubeconfig, the logs and the ready marker (required)")
	flag.StringVar(&o.cli, "cli", "bin/manila-setup", "the manila-setup binary the operator runs from")
	flag.StringVar(&o.cloud, "cloud", testenv.CloudDemo, "cloud of the loopback clouds.yaml whose credentials the operator gets")
	flag.StringVar(&o.infraID, "infra-id", "ostest-demo1", "the cluster's infrastructure name")
	flag.IntVar(&o.workers, "workers", 3, "worker Machines")
	flag.DurationVar(&o.nodeDelay, "node-delay", 5*time.Second, "how long a new Machine takes to become a Node (a server booting)")
	flag.Parse()
	if o.dir == "" {
		fmt.Fprintln(os.Stderr, "sandbox: --dir is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := &sandbox{options: o}
	err := s.up(ctx)
	if err == nil {
		err = s.serve(ctx)
	}
	step("stopping the sandbox")
	s.down()
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(1)
	}
	step("sandbox stopped")
}

type sandbox struct {
	options
	sim      *testenv.SimCluster
	machines *machinectl.Cluster
	operator *exec.Cmd
	opDone   chan error
	csi      *testenv.CSIController
}

func (s *sandbox) up(ctx context.Context) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(s.dir, "ready"))
	cloud, err := testenv.LoadCloud()
	if err != nil {
		return err
	}
	cli, err := filepath.Abs(s.cli)
	if err != nil {
		return err
	}
	if _, err := os.Stat(cli); err != nil {
		return fmt.Errorf("the manila-setup binary: %w (make build)", err)
	}

	step("sim cluster: kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok; 3 control-plane nodes")
	start := time.Now()
	s.sim, err = testenv.StartSimCluster(ctx, testenv.SimOptions{ControlPlaneNodes: 3})
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(s.dir, "kubeconfig")
	b, err := os.ReadFile(s.sim.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
		return err
	}
	step("sim cluster up in %s; kubeconfig %s", since(start), kubeconfig)

	step("installer-shaped cluster: Infrastructure, install-config, worker MachineSet (%d Machines) and the Machine API", s.workers)
	start = time.Now()
	// The Machines' servers get real Neutron ports, so that networks discover sees what the
	// cluster and the operator see.
	ports, err := machinectl.NeutronPorts(ctx, cloud.CloudsFile, s.cloud)
	if err != nil {
		return err
	}
	s.machines, err = machinectl.InstallerShaped(ctx, s.sim, machinectl.ClusterOptions{
		InfraID: s.infraID, Workers: int32(s.workers),
		Controller: machinectl.Options{NodeDelay: s.nodeDelay, DeleteDelay: time.Second, Interval: 500 * time.Millisecond, Ports: ports},
	})
	if err != nil {
		return err
	}
	step("MachineSet openshift-machine-api/%s: %d Machines Running, their Nodes Ready, in %s", s.machines.MachineSet, s.workers, since(start))

	step("operator: install (objects and credentials of cloud %q), then run it as a local process", s.cloud)
	start = time.Now()
	install := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", kubeconfig,
		"--os-cloud", s.cloud, "--os-client-config-file", cloud.CloudsFile)
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("manila-setup operator install: %v\n%s", err, out)
	}
	// The operator runs here, not in the cluster (kwok's pods run nothing): no in-cluster replica.
	// A patch, not an update: the deployment controller writes the object at the same time.
	if _, err := s.sim.Client.AppsV1().Deployments(operator.DefaultNamespace).Patch(ctx, operator.OperatorName,
		types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scaling the in-cluster operator to 0: %w", err)
	}
	health, err := freeAddress()
	if err != nil {
		return err
	}
	if err := s.startOperator(cli, kubeconfig, health); err != nil {
		return err
	}
	classes, err := s.waitOperator(ctx)
	if err != nil {
		return err
	}
	step("operator running (health and metrics on http://%s): driver deployed, Secret %s, StorageClasses %s, in %s",
		health, operator.DriverSecretName, strings.Join(classes, ", "), since(start))

	step("real Manila CSI driver: manila-csi-plugin (controller service) and csi-provisioner")
	start = time.Now()
	s.csi, err = testenv.StartCSIController(ctx, testenv.CSIControllerOptions{Kubeconfig: kubeconfig, Dir: filepath.Join(s.dir, "csi"), ClusterID: s.infraID})
	if err != nil {
		return err
	}
	step("driver serving on %s in %s", s.csi.Socket, since(start))
	return os.WriteFile(filepath.Join(s.dir, "ready"), []byte(fmt.Sprintf("pid %d\nup in %s\n", os.Getpid(), since(t0))), 0o644)
}

func (s *sandbox) startOperator(cli, kubeconfig, health string) error {
	logFile, err := os.Create(filepath.Join(s.dir, "operator.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(cli, "operator", "start", "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--health-address", health, "--resync", "30s")
	env := os.Environ()
	im := operator.DefaultImages
	for k, p := range im.ImageEnv() {
		if os.Getenv(k) == "" {
			env = append(env, k+"="+*p)
		}
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting the operator: %w", err)
	}
	s.operator, s.opDone = cmd, make(chan error, 1)
	go func() {
		err := cmd.Wait()
		logFile.Close()
		s.opDone <- err
		close(s.opDone)
	}()
	return nil
}

func (s *sandbox) operatorExited() error {
	select {
	case err := <-s.opDone:
		return fmt.Errorf("the operator exited (%v); see %s", err, filepath.Join(s.dir, "operator.log"))
	default:
		return nil
	}
}

// waitOperator waits until the operator has written the driver Secret and a StorageClass per
// share type, and returns the classes' names.
func (s *sandbox) waitOperator(ctx context.Context) ([]string, error) {
	var classes []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := s.operatorExited(); err != nil {
			return false, err
		}
		if _, err := s.sim.Client.CoreV1().Secrets(operator.DefaultNamespace).Get(ctx, operator.DriverSecretName, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		list, err := s.sim.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: operator.LabelManagedBy + "=" + operator.ManagedByValue})
		if err != nil {
			return false, nil
		}
		classes = classes[:0]
		for _, sc := range list.Items {
			classes = append(classes, sc.Name)
		}
		sort.Strings(classes)
		return len(classes) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the operator's Secret and StorageClasses: %w (log: %s)", err, filepath.Join(s.dir, "operator.log"))
	}
	return classes, nil
}

// serve watches the processes until ctx ends; a component that dies ends the sandbox.
func (s *sandbox) serve(ctx context.Context) error {
	step("sandbox ready (pid %d); stop it with: make demo-down", os.Getpid())
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := s.operatorExited(); err != nil {
			return err
		}
		if err := s.csi.Alive(); err != nil {
			return err
		}
		if _, err := s.sim.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil && ctx.Err() == nil {
			step("warning: the apiserver did not answer: %v", err)
		}
	}
}

func (s *sandbox) down() {
	_ = os.Remove(filepath.Join(s.dir, "ready"))
	if s.csi != nil {
		s.csi.Stop()
	}
	if s.operator != nil && s.operator.Process != nil {
		_ = s.operator.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.opDone:
		case <-time.After(10 * time.Second):
			_ = s.operator.Process.Kill()
		}
	}
	if s.machines != nil {
		s.machines.Stop()
	}
	if s.sim != nil {
		s.sim.Stop()
	}
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

// freeAddress returns a loopback address with a port nothing listens on.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Command sandbox runs the long-lived cluster of `make demo` until it gets SIGTERM or SIGINT: a
// sim cluster (real kube-apiserver, etcd, kube-controller-manager and kube-scheduler; kwok
// nodes) shaped like a fresh OpenShift-on-OpenStack install: three masters under the
// installer's ControlPlaneMachineSet and a worker MachineSet, every Machine a Nova server made by
// the real Machine API; the manila-setup operator as a local process with the loopback cloud's
// credentials, and the real Manila CSI driver, so that claims become real shares in the loopback
// Manila.
//
// As root, a real kubelet (testenv.RealNode) joins as one more control-plane node: the driver's
// pods the operator renders run there for real, from images built here, and provision the
// claims. Without root every node is a kwok node, and the driver's controller side
// (manila-csi-plugin and csi-provisioner) runs as local processes instead.
//
// It writes <dir>/kubeconfig, logs every component under <dir>, prints progress with timings,
// and writes <dir>/ready once everything is up. test/env/demo.sh starts it; demo-down.sh stops
// it.
package main

import (
	"context"
	"errors"
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
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
	"github.com/manila-setup/manila-setup/test/testenv/nodeboot"
)

type options struct {
	dir      string
	cli      string
	cloud    string
	infraID  string
	workers  int
	realNode string
	// guestWorkers is how many attached workers at most get a real body (guest nodes).
	guestWorkers int
	// podPorts are ports of 127.0.0.1 the real node's pods reach besides the cloud's.
	podPorts string
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
	flag.StringVar(&o.podPorts, "pod-loopback-ports", "", "comma-separated ports of the machine's 127.0.0.1 that the real node's pods reach at 127.0.0.1, besides the loopback cloud's")
	flag.StringVar(&o.realNode, "real-node", "auto", "a real kubelet as a control-plane node, running the driver's pods: on, off, or auto (on as root when test/env/node/build.sh built the kubelet)")
	flag.IntVar(&o.guestWorkers, "guest-workers", 2, "attached workers (a port on the storage network) that boot as guest nodes, real kernels whose pods mount Manila shares, at most; 0: none (every worker a kwok node). Needs root and the real NFS back end")
	flag.Parse()
	if o.dir == "" {
		fmt.Fprintln(os.Stderr, "sandbox: --dir is required")
		os.Exit(2)
	}
	if o.realNode != "on" && o.realNode != "off" && o.realNode != "auto" {
		fmt.Fprintf(os.Stderr, "sandbox: --real-node=%q: want on, off or auto\n", o.realNode)
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
	machines *machineapi.Cluster
	operator *exec.Cmd
	opDone   chan error
	csi      *testenv.CSIController
	node     *testenv.RealNode
	guests   *machineapi.GuestWorkers // nil: every worker is a kwok node
	rwx      rwxDemo
	reserved []string // kwok control-plane nodes cordoned until a controller replica is on the real node
}

func (s *sandbox) up(ctx context.Context) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(s.dir, "ready"))
	_ = os.Remove(filepath.Join(s.dir, "real-node"))
	_ = os.Remove(filepath.Join(s.dir, "rwx-demo"))
	_ = os.Remove(filepath.Join(s.dir, "guest-workers"))
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

	real, why := s.wantRealNode()
	guests, whyNoGuests := real && s.guestWorkers > 0, "no real node"
	if s.guestWorkers <= 0 {
		whyNoGuests = "--guest-workers=0"
	}
	if guests {
		if _, err := testenv.LoadNFSBackend(); err != nil {
			guests, whyNoGuests = false, err.Error()
		}
	}
	// The masters are Machines: their Nodes come with their servers, below.
	step("sim cluster: kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok")
	start := time.Now()
	// ServiceAccount tokens: the real node's pods talk to the apiserver as themselves. The node
	// proxy: the apiserver reaches the guest workers' kubelets (logs, exec) through it.
	s.sim, err = testenv.StartSimCluster(ctx, testenv.SimOptions{APIServer: testenv.APIServerOptions{ServiceAccountTokens: real, GuestNodes: guests}})
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
	// What OpenShift's csi-snapshot-controller-operator gives every cluster: the operator then
	// applies its VolumeSnapshotClass, and the driver's csi-snapshotter takes snapshots.
	start = time.Now()
	if err := s.sim.ServeSnapshots(ctx); err != nil {
		return err
	}
	step("snapshot CRDs and snapshot-controller up in %s", since(start))

	// The real node builds its images and starts while the Machine API and the operator come up.
	nodeUp := make(chan error, 1)
	var nodeReady string
	if real {
		step("real node %s: images of every operand, containerd, kubelet (in the background)", realNodeName)
		go func() {
			var err error
			nodeReady, err = s.startRealNode(ctx)
			nodeUp <- err
		}()
	} else {
		step("no real node (%s): every node is a kwok node", why)
		nodeUp <- nil
	}

	var bodies nodeboot.Bodies
	if guests {
		clients, err := machineapi.Connect(ctx, cloud.CloudsFile, s.cloud)
		if err != nil {
			return errors.Join(err, <-nodeUp)
		}
		s.guests, err = machineapi.NewGuestWorkers(ctx, s.sim, cloud, clients, machineapi.GuestWorkersOptions{
			Max: s.guestWorkers, ShellImage: shellImage, Log: step})
		if err != nil {
			whyNoGuests = err.Error()
		} else {
			bodies = s.guests
			// What make demo's summary and its wait for the writers read (test/env/demo-info.sh, up.sh).
			if err := os.WriteFile(filepath.Join(s.dir, "guest-workers"), []byte(strconv.Itoa(s.guestWorkers)+"\n"), 0o644); err != nil {
				return errors.Join(err, <-nodeUp)
			}
			step("guest workers: up to %d workers with a port on the storage network boot as guest nodes (QEMU, a real kernel, containerd and kubelet); their images build in the background", s.guestWorkers)
		}
	}
	if s.guests == nil {
		step("no guest workers (%s): every worker is a kwok node, whose pods mount nothing", whyNoGuests)
	}

	step("installer-shaped cluster: the cloud seeded as the installer leaves it, Infrastructure, install-config, 3 masters under the ControlPlaneMachineSet, worker MachineSet (%d Machines) and the real Machine API making Nova servers", s.workers)
	start = time.Now()
	s.machines, err = machineapi.InstallerShaped(ctx, s.sim, machineapi.ClusterOptions{
		CloudsFile: cloud.CloudsFile, Cloud: s.cloud, InfraID: s.infraID, Workers: int32(s.workers), Masters: true,
		Bodies: bodies,
	})
	if err != nil {
		return errors.Join(err, <-nodeUp)
	}
	step("ControlPlaneMachineSet openshift-machine-api/cluster: 3 masters, MachineSet openshift-machine-api/%s: %d Machines; all Running on Nova servers (openstack --os-cloud %s server list), their Nodes Ready, in %s",
		s.machines.MachineSet, s.workers, s.cloud, since(start))
	if real {
		if err := s.reserveRealNode(ctx); err != nil {
			return errors.Join(err, <-nodeUp)
		}
	}

	step("operator: install (objects and credentials of cloud %q), then run it as a local process", s.cloud)
	start = time.Now()
	install := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", kubeconfig,
		"--os-cloud", s.cloud, "--os-client-config-file", cloud.CloudsFile)
	if out, err := install.CombinedOutput(); err != nil {
		return errors.Join(fmt.Errorf("manila-setup operator install: %v\n%s", err, out), <-nodeUp)
	}
	// The operator runs here, as a process whose log and health a reader can open: no in-cluster
	// replica. A patch, not an update: the deployment controller writes the object at the same time.
	if _, err := s.sim.Client.AppsV1().Deployments(operator.DefaultNamespace).Patch(ctx, operator.OperatorName,
		types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		return errors.Join(fmt.Errorf("scaling the in-cluster operator to 0: %w", err), <-nodeUp)
	}
	health, err := freeAddress()
	if err != nil {
		return errors.Join(err, <-nodeUp)
	}
	if err := s.startOperator(cli, kubeconfig, health); err != nil {
		return errors.Join(err, <-nodeUp)
	}
	classes, err := s.waitOperator(ctx)
	if err != nil {
		return errors.Join(err, <-nodeUp)
	}
	// The kubelets of the kwok nodes, which run no plugin, register the driver's node plugins
	// in their CSINodes as a real kubelet does once the plugin runs.
	go testenv.KeepCSINodes(ctx, s.sim.Client, operator.DefaultNamespace, 2*time.Second)
	step("operator running (health and metrics on http://%s): driver deployed, Secret %s, StorageClasses %s, in %s",
		health, operator.DriverSecretName, strings.Join(classes, ", "), since(start))

	if err := <-nodeUp; err != nil {
		return err
	}
	if real {
		step("%s", nodeReady)
		if err := s.waitDriverPods(ctx); err != nil {
			return err
		}
	} else {
		step("real Manila CSI driver: manila-csi-plugin (controller service) and csi-provisioner, as local processes")
		start = time.Now()
		s.csi, err = testenv.StartCSIController(ctx, testenv.CSIControllerOptions{Kubeconfig: kubeconfig, Dir: filepath.Join(s.dir, "csi"), ClusterID: s.infraID})
		if err != nil {
			return err
		}
		step("driver serving on %s in %s", s.csi.Socket, since(start))
	}
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
		if s.csi != nil {
			if err := s.csi.Alive(); err != nil {
				return err
			}
		}
		if s.node != nil {
			s.tendRealNode(ctx)
		}
		s.tendRWXDemo(ctx)
		if _, err := s.sim.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil && ctx.Err() == nil {
			step("warning: the apiserver did not answer: %v", err)
		}
	}
}

func (s *sandbox) down() {
	_ = os.Remove(filepath.Join(s.dir, "ready"))
	_ = os.Remove(filepath.Join(s.dir, "real-node"))
	_ = os.Remove(filepath.Join(s.dir, "rwx-demo"))
	_ = os.Remove(filepath.Join(s.dir, "guest-workers"))
	if s.guests != nil {
		s.guests.Stop()
	}
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
	if s.node != nil {
		if err := s.node.Stop(); err != nil {
			step("warning: stopping the real node: %v", err)
		}
	}
	if s.machines != nil {
		if err := s.machines.Stop(); err != nil {
			step("warning: stopping the Machine API and deleting the cluster's servers: %v", err)
		}
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

package main

import (
	"context"
	_ "embed"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
)

// shellImage is the busybox image (test/env/node/images.sh, SHELL_IMAGE) of the demo's writers.
const shellImage = "localhost/manila-setup/shell:sandbox"

// rwxDemoYAML is what the demo applies once two guest workers are Ready.
//
//go:embed rwx-demo.yaml
var rwxDemoYAML string

const (
	rwxNamespace = "rwx-demo"
	rwxClaim     = "shared"
	rwxClass     = "csi-manila-default"
)

var rwxWriters = [2]string{"writer-one", "writer-two"}

// rwxDemo runs the seed's demo once the workers are attached: two writer pods on two guest
// workers share one claim, and each reads the other's lines. It is tended from the sandbox's
// loop; each step is taken once, when what it needs is there.
type rwxDemo struct {
	applied, shown bool
	start          time.Time
	nodes          [2]string
}

// tendRWXDemo applies the demo once two guest workers are Ready and the operator's class
// admits their storage addresses (a claim made before would get a share whose rule admits the
// machine network only), then, once each writer reads the other's lines, writes what to type to
// see it into <dir>/rwx-demo and says it.
func (s *sandbox) tendRWXDemo(ctx context.Context) {
	d := &s.rwx
	if s.guests == nil || d.shown {
		return
	}
	if !d.applied {
		ready := s.guests.Ready()
		if len(ready) < 2 || !s.classAdmits(ctx, ready[:2]) {
			return
		}
		d.nodes = [2]string{ready[0].Name, ready[1].Name}
		if err := s.applyRWXDemo(ctx); err != nil {
			step("warning: the rwx-demo writers: %v", err)
			return
		}
		d.applied, d.start = true, time.Now()
		step("rwx-demo: claim %s/%s (class %s) and writers %s on %s and %s on %s (test/env/sandbox/rwx-demo.yaml)",
			rwxNamespace, rwxClaim, rwxClass, rwxWriters[0], d.nodes[0], rwxWriters[1], d.nodes[1])
		return
	}
	for i, pod := range rwxWriters {
		other := rwxWriters[1-i]
		out, err := testenv.ExecInPod(ctx, s.sim.Config, rwxNamespace, pod, "tail", "-n", "1", "/mnt/test/"+other)
		if err != nil || !strings.Contains(out, other+" line ") {
			if time.Since(d.start) > 5*time.Minute && int(time.Since(d.start).Seconds())%60 < 2 {
				step("warning: rwx-demo: %s does not read %s's lines yet (%v); manila-setup diagnose pod/%s -n %s says why", pod, other, err, pod, rwxNamespace)
			}
			return
		}
	}
	d.shown = true
	pv := ""
	if c, err := s.sim.Client.CoreV1().PersistentVolumeClaims(rwxNamespace).Get(ctx, rwxClaim, metav1.GetOptions{}); err == nil {
		if v, err := s.sim.Client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{}); err == nil && v.Spec.CSI != nil {
			pv = fmt.Sprintf(", Manila share %s", v.Spec.CSI.VolumeHandle)
		}
	}
	text := fmt.Sprintf(`Two pods on two workers with real kernels share one Manila share (claim %s/%s%s):
  %s on %s and %s on %s each append a line a second to a file named as
  themselves; each reads the other's:
    kubectl exec -n %s %s -- tail -n 3 /mnt/test/%s
    kubectl exec -n %s %s -- tail -n 3 /mnt/test/%s
    kubectl get pods -n %s -o wide
`, rwxNamespace, rwxClaim, pv, rwxWriters[0], d.nodes[0], rwxWriters[1], d.nodes[1],
		rwxNamespace, rwxWriters[0], rwxWriters[1], rwxNamespace, rwxWriters[1], rwxWriters[0], rwxNamespace)
	if err := writeFileAtomic(filepath.Join(s.dir, "rwx-demo"), []byte(text)); err != nil {
		step("warning: %v", err)
	}
	step("rwx-demo: each writer reads the other's lines, %s after the writers were created:\n%s", since(d.start), text)
}

// classAdmits tells whether the demo's class admits every node's address on the storage
// network (its nfs-shareClient), as the operator sets it once the workers are attached.
func (s *sandbox) classAdmits(ctx context.Context, nodes []machineapi.GuestWorker) bool {
	sc, err := s.sim.Client.StorageV1().StorageClasses().Get(ctx, rwxClass, metav1.GetOptions{})
	if err != nil {
		return false
	}
	var clients []netip.Prefix
	for _, c := range strings.Split(sc.Parameters["nfs-shareClient"], ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			clients = append(clients, p)
		}
	}
	for _, n := range nodes {
		a, err := netip.ParseAddr(n.StorageIP)
		if err != nil {
			return false
		}
		admitted := false
		for _, p := range clients {
			admitted = admitted || p.Contains(a)
		}
		if !admitted {
			return false
		}
	}
	return true
}

// applyRWXDemo creates the objects of rwx-demo.yaml, the two nodes filled in; what exists
// already is left as it is.
func (s *sandbox) applyRWXDemo(ctx context.Context) error {
	text := strings.NewReplacer("NODE_ONE", s.rwx.nodes[0], "NODE_TWO", s.rwx.nodes[1]).Replace(rwxDemoYAML)
	k := s.sim.Client.CoreV1()
	for _, part := range strings.Split(text, "\n---\n") {
		doc := []byte(part)
		var meta metav1.TypeMeta
		err := yaml.Unmarshal(doc, &meta)
		if err != nil {
			return fmt.Errorf("rwx-demo.yaml: %w", err)
		}
		switch meta.Kind {
		case "Namespace":
			var o corev1.Namespace
			if err = yaml.UnmarshalStrict(doc, &o); err == nil {
				_, err = k.Namespaces().Create(ctx, &o, metav1.CreateOptions{})
			}
		case "PersistentVolumeClaim":
			var o corev1.PersistentVolumeClaim
			if err = yaml.UnmarshalStrict(doc, &o); err == nil {
				_, err = k.PersistentVolumeClaims(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
			}
		case "Pod":
			var o corev1.Pod
			if err = yaml.UnmarshalStrict(doc, &o); err == nil {
				_, err = k.Pods(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
			}
		default:
			err = fmt.Errorf("rwx-demo.yaml: kind %q", meta.Kind)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// writeFileAtomic writes a file whole or not at all: a reader (demo-info.sh) never sees half.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

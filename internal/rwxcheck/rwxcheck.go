// Package rwxcheck proves that a StorageClass gives ReadWriteMany volumes that really are shared:
// two pods on two nodes write to one file of one claim and read each other's lines. The attach
// wizard runs it at the end, and the end-to-end tests run it the same way.
package rwxcheck

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// DefaultImage runs the writer pods: a small image every OpenShift cluster can pull.
const DefaultImage = "registry.access.redhat.com/ubi9/ubi-minimal:latest"

// Options tune Run.
type Options struct {
	StorageClass string
	Timeout      time.Duration // for the volume to bind and both writers to finish
	Image        string
	Report       func(string) // progress lines; may be nil
	Poll         time.Duration
}

// Result is what the check saw.
type Result struct {
	StorageClass string
	Namespace    string
	// Nodes are where the two writers ran (empty when they were never scheduled).
	Nodes [2]string
	// Lines are what each writer read back from the shared volume.
	Lines [2][]string
	// OK: both writers saw each other's lines.
	OK bool
	// Problem says what went wrong, in a sentence with what to do; empty when OK.
	Problem string
	// Simulated: the writers were scheduled on simulated nodes (kwok), which run no containers;
	// the check stopped once the volume was bound and Problem says how far it got.
	Simulated bool
	// CleanedUp: everything created was deleted (Cleanup says otherwise what was left).
	CleanedUp bool
	Cleanup   string
}

// Label marks everything the check creates (its namespace), so that what is left behind can be found.
const Label = "manila-setup.io/rwx-check"

// writerScript appends three lines to the shared file, waits for the other writer, then prints
// the whole file: both pods' logs show both writers' lines when the volume is really shared.
const writerScript = `set -e
for i in 1 2 3; do echo "$WRITER on $NODE line $i" >> /data/rwx-check.log; sleep 2; done
sleep 6
cat /data/rwx-check.log`

// Run creates, in a namespace of its own, a ReadWriteMany PVC of opts.StorageClass and two
// pods that must run on different nodes, both writing to one file on it; it returns what each
// read back, then deletes the namespace. It reports plainly when the volume does not bind or the
// pods produce no output in time (as on a cluster without a container runtime), and never
// claims more than it saw.
func Run(ctx context.Context, kc kubernetes.Interface, opts Options) (r Result) {
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.Poll == 0 {
		opts.Poll = time.Second
	}
	report := func(format string, a ...any) {
		if opts.Report != nil {
			opts.Report(fmt.Sprintf(format, a...))
		}
	}
	r = Result{StorageClass: opts.StorageClass}
	ns, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "manila-setup-rwx-check-", Labels: map[string]string{Label: "true"}}}, metav1.CreateOptions{})
	if err != nil {
		r.Problem = fmt.Sprintf("creating a namespace for the check failed: %v; the check needs to create namespaces, PVCs and pods", err)
		r.CleanedUp = true
		return r
	}
	r.Namespace = ns.Name
	report("namespace %s created", ns.Name)
	defer func() {
		// The caller's context may be over; cleaning up gets its own time.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := kc.CoreV1().Namespaces().Delete(cctx, ns.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
			r.Cleanup = fmt.Sprintf("deleting namespace %s failed (%v): delete it with `oc delete namespace %s`", ns.Name, err, ns.Name)
			return
		}
		r.CleanedUp = true
		report("namespace %s deleted", ns.Name)
	}()

	sc := opts.StorageClass
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "rwx-check"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &sc,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := kc.CoreV1().PersistentVolumeClaims(ns.Name).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		r.Problem = fmt.Sprintf("creating PVC %s/rwx-check of StorageClass %s failed: %v", ns.Name, sc, err)
		return r
	}
	report("PVC rwx-check (ReadWriteMany, 1Gi, %s) created", sc)
	for i := 1; i <= 2; i++ {
		if _, err := kc.CoreV1().Pods(ns.Name).Create(ctx, writerPod(i, opts.Image), metav1.CreateOptions{}); err != nil {
			r.Problem = fmt.Sprintf("creating writer pod %s/writer-%d failed: %v", ns.Name, i, err)
			return r
		}
	}
	report("pods writer-1 and writer-2 created (they must run on different nodes)")

	deadline := time.Now().Add(opts.Timeout)
	bound, finished := false, false
	var pods [2]*corev1.Pod
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if !bound {
			if p, err := kc.CoreV1().PersistentVolumeClaims(ns.Name).Get(ctx, "rwx-check", metav1.GetOptions{}); err == nil && p.Status.Phase == corev1.ClaimBound {
				bound = true
				report("PVC bound to %s", p.Spec.VolumeName)
			}
		}
		done := 0
		for i := 0; i < 2; i++ {
			p, err := kc.CoreV1().Pods(ns.Name).Get(ctx, fmt.Sprintf("writer-%d", i+1), metav1.GetOptions{})
			if err != nil {
				continue
			}
			if p.Spec.NodeName != "" && r.Nodes[i] == "" {
				r.Nodes[i] = p.Spec.NodeName
				report("writer-%d scheduled on %s", i+1, p.Spec.NodeName)
			}
			pods[i] = p
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				done++
			}
		}
		if done == 2 {
			finished = true
			break
		}
		// Simulated nodes run no containers: once the volume is bound and both writers have a
		// node, there is nothing more to wait for.
		if bound && r.Nodes[0] != "" && r.Nodes[1] != "" && (simulatedNode(ctx, kc, r.Nodes[0]) || simulatedNode(ctx, kc, r.Nodes[1])) {
			r.Simulated = true
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(opts.Poll):
		}
	}
	for i := 0; i < 2; i++ {
		if r.Nodes[i] == "" {
			continue
		}
		raw, err := kc.CoreV1().Pods(ns.Name).GetLogs(fmt.Sprintf("writer-%d", i+1), &corev1.PodLogOptions{}).Do(ctx).Raw()
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(bytes.TrimSpace(raw)), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				r.Lines[i] = append(r.Lines[i], l)
			}
		}
	}
	switch {
	case r.Simulated:
		r.Problem = fmt.Sprintf("the volume of %s was provisioned and bound, and the writers were scheduled on %s and %s, but those nodes are simulated (kwok) and run no containers, so the two writers cannot show a shared file here; on a real cluster this check goes on to compare their lines", sc, r.Nodes[0], r.Nodes[1])
	case ctx.Err() != nil:
		r.Problem = "interrupted before the writers finished"
	case !bound:
		r.Problem = fmt.Sprintf("PVC rwx-check was not bound within %s: StorageClass %s provisioned no volume. Look at `oc describe pvc` events while the driver is Available, and at the driver's controller logs", opts.Timeout, sc)
	case r.Nodes[0] == "" || r.Nodes[1] == "":
		r.Problem = fmt.Sprintf("the writers were not both scheduled within %s: the check needs two schedulable worker nodes", opts.Timeout)
	case r.Nodes[0] == r.Nodes[1]:
		r.Problem = "both writers ran on the same node, which proves nothing about sharing between nodes"
	case len(r.Lines[0]) == 0 && len(r.Lines[1]) == 0:
		r.Problem = fmt.Sprintf("the writer pods produced no logs within %s, so nothing can be said about the volume. On a cluster without a container runtime (a simulation) pods never run; on a real cluster look at `oc describe pod` for image pull or mount errors", opts.Timeout)
	case !finished:
		r.Problem = fmt.Sprintf("the writers did not finish within %s", opts.Timeout)
	default:
		r.OK = sawBoth(r.Lines[0]) && sawBoth(r.Lines[1])
		if !r.OK {
			r.Problem = "each writer saw only its own lines: the two pods did not share one volume"
			for i := 0; i < 2; i++ {
				if pods[i] != nil && pods[i].Status.Phase == corev1.PodFailed {
					r.Problem = fmt.Sprintf("writer-%d failed (mount or permission problem): see its lines below", i+1)
				}
			}
		}
	}
	return r
}

// simulatedNode says whether a node is one of kwok's, which report Ready but run nothing.
func simulatedNode(ctx context.Context, kc kubernetes.Interface, name string) bool {
	n, err := kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	return err == nil && n.Annotations["kwok.x-k8s.io/node"] == "fake"
}

func sawBoth(lines []string) bool {
	var one, two bool
	for _, l := range lines {
		one = one || strings.HasPrefix(l, "writer-1 ")
		two = two || strings.HasPrefix(l, "writer-2 ")
	}
	return one && two
}

func writerPod(i int, image string) *corev1.Pod {
	name := fmt.Sprintf("writer-%d", i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{Label: "writer"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{Label: "writer"}},
					TopologyKey:   "kubernetes.io/hostname",
				}},
			}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:    "writer",
				Image:   image,
				Command: []string{"/bin/sh", "-c", writerScript},
				Env: []corev1.EnvVar{
					{Name: "WRITER", Value: name},
					{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "rwx-check"}}}},
		},
	}
}

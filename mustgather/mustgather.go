// Package mustgather collects what a support case about the Manila CSI driver needs, into a
// folder laid out as `oc adm must-gather` expects (cluster-scoped/, namespaces/NS/...): the
// ClusterCSIDriver and the companion's status, the operator's and the driver's workloads, pods,
// their logs (current and previous) and events, the driver's StorageClasses,
// VolumeSnapshotClasses, PersistentVolumes and claims, the CSINodes, the MachineSets and the
// ControlPlaneMachineSet (their attachment records), and with a cloud the shares and access
// rules of the driver's volumes. OpenShift's own must-gather collects none of this.
//
// No Secret is collected, and no secret value leaves in any file: the values of the Secrets of
// the namespaces gathered (the cloud credentials, the driver's Secret) are read once, kept in
// memory, and every file is scrubbed of each of them, plain, base64-encoded and URL-encoded,
// before it is written. A value that could not be read is not known to the scrubber: Collect
// says so.
package mustgather

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/internal/atomicfile"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// DefaultLogLimit bounds each container log gathered: the newest bytes are kept.
const DefaultLogLimit = 8 << 20

// Options say where to gather from and to.
type Options struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Dir receives the files; it is made if missing.
	Dir string
	// Cloud, when set, is asked for the shares and access rules of the driver's volumes.
	Cloud func(context.Context) (*openstack.Client, error)
	// LogLimit bounds each container log (default DefaultLogLimit).
	LogLimit int64
	// Progress is told each file written (nil: nothing).
	Progress func(path string)
}

// Summary is what Collect did.
type Summary struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Skipped lists what could not be gathered, with why.
	Skipped []string `json:"skipped,omitempty"`
}

// Namespaces are those gathered: the operator's and the driver's in either mode.
var Namespaces = []string{operator.DefaultNamespace, operator.CompanionNamespace, operator.PlatformDriverNamespace}

var (
	clusterCSIDriverGVR = schema.GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "clustercsidrivers"}
	companionGVR        = schema.GroupVersionResource{Group: operator.CompanionGroup, Version: operator.CompanionVersion, Resource: operator.CompanionResource}
	snapshotClassGVR    = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
	snapshotContentGVR  = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
	volumeSnapshotGVR   = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	machineSetGVR       = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machinesets"}
	controlPlaneGVR     = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1", Resource: "controlplanemachinesets"}
)

type gatherer struct {
	o       Options
	secrets [][]byte // what is scrubbed from every file: longest first
	sum     Summary
}

// Collect gathers into o.Dir. The error is for a folder that cannot be written or a canceled
// context; what the cluster or the cloud cannot give is listed in Summary.Skipped.
func Collect(ctx context.Context, o Options) (Summary, error) {
	if o.LogLimit <= 0 {
		o.LogLimit = DefaultLogLimit
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Summary{}, err
	}
	g := &gatherer{o: o}
	g.learnSecrets(ctx)
	steps := []func(context.Context) error{g.clusterScoped, g.machineAPI, g.namespaces, g.cloud}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return g.sum, err
		}
		if err := ctx.Err(); err != nil {
			return g.sum, err
		}
	}
	return g.sum, nil
}

func (g *gatherer) skip(format string, a ...any) {
	g.sum.Skipped = append(g.sum.Skipped, fmt.Sprintf(format, a...))
}

// learnSecrets reads the secret values of the Secrets of the gathered namespaces: those of secret
// keys, whole files, and the passwords and secrets inside them (a clouds.yaml holds its
// password as one line of a larger value).
func (g *gatherer) learnSecrets(ctx context.Context) {
	seen := map[string]bool{}
	add := func(v string) {
		v = strings.TrimSpace(strings.Trim(strings.TrimSpace(v), `"'`))
		if len(v) < 4 || seen[v] {
			return
		}
		seen[v] = true
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), url.QueryEscape(v), url.PathEscape(v)} {
			g.secrets = append(g.secrets, []byte(form))
		}
	}
	for _, ns := range Namespaces {
		list, err := g.o.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			g.skip("the Secrets of namespace %s could not be read, so their values are not scrubbed from the logs: %v", ns, err)
			continue
		}
		for _, s := range list.Items {
			for k, v := range s.Data {
				// A secret key's value whole (os-password, tls.key), and a file whole (a
				// clouds.yaml); not a user name or a region, which a reader needs.
				if secretKey(k) || bytes.Contains(v, []byte("\n")) {
					add(string(v))
				}
				for _, line := range strings.Split(string(v), "\n") {
					key, value, ok := cutKeyValue(line)
					if ok && secretKey(key) {
						add(value)
					}
				}
			}
		}
	}
	sort.Slice(g.secrets, func(i, j int) bool { return len(g.secrets[i]) > len(g.secrets[j]) })
}

// cutKeyValue reads "key: value" (YAML) or "key = value" (INI).
func cutKeyValue(line string) (string, string, bool) {
	if k, v, ok := strings.Cut(line, ":"); ok {
		return strings.TrimSpace(k), v, true
	}
	if k, v, ok := strings.Cut(line, "="); ok {
		return strings.TrimSpace(k), v, true
	}
	return "", "", false
}

func secretKey(k string) bool {
	k = strings.ToLower(k)
	return strings.Contains(k, "password") || strings.Contains(k, "secret") || strings.Contains(k, "token") || strings.Contains(k, "key")
}

// scrub replaces every known secret value.
func (g *gatherer) scrub(b []byte) []byte {
	for _, s := range g.secrets {
		if bytes.Contains(b, s) {
			b = bytes.ReplaceAll(b, s, []byte("<redacted>"))
		}
	}
	return b
}

// write stores one file under Dir, scrubbed, atomically.
func (g *gatherer) write(rel string, data []byte) error {
	path := filepath.Join(g.o.Dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data = g.scrub(data)
	if err := atomicfile.WriteNew(path, data, 0o644); err != nil {
		return err
	}
	g.sum.Files++
	g.sum.Bytes += int64(len(data))
	if g.o.Progress != nil {
		g.o.Progress(rel)
	}
	return nil
}

// writeObject stores an object as YAML, without its managedFields (noise for a reader).
func (g *gatherer) writeObject(rel string, obj any) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	return g.write(rel, b)
}

// clusterScoped gathers the ClusterCSIDriver, the companion's status, the driver's classes,
// volumes and claims, and the CSINodes.
func (g *gatherer) clusterScoped(ctx context.Context) error {
	for _, x := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{clusterCSIDriverGVR, operator.DriverName}, {companionGVR, operator.CompanionName}} {
		u, err := g.o.Dynamic.Resource(x.gvr).Get(ctx, x.name, metav1.GetOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				g.skip("%s %s: %v", x.gvr.Resource, x.name, err)
			}
			continue
		}
		if err := g.writeObject("cluster-scoped/"+x.gvr.Resource+"/"+x.name+".yaml", u); err != nil {
			return err
		}
	}
	scs, err := g.o.Kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		g.skip("StorageClasses: %v", err)
	} else {
		for i := range scs.Items {
			if sc := &scs.Items[i]; sc.Provisioner == operator.DriverName {
				sc.APIVersion, sc.Kind = "storage.k8s.io/v1", "StorageClass"
				if err := g.writeObject("cluster-scoped/storageclasses/"+sc.Name+".yaml", sc); err != nil {
					return err
				}
			}
		}
	}
	vscs, err := g.o.Dynamic.Resource(snapshotClassGVR).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		g.skip("VolumeSnapshotClasses: the cluster does not serve snapshot.storage.k8s.io/v1")
	case err != nil:
		g.skip("VolumeSnapshotClasses: %v", err)
	default:
		for i := range vscs.Items {
			if u := &vscs.Items[i]; u.Object["driver"] == operator.DriverName {
				if err := g.writeObject("cluster-scoped/volumesnapshotclasses/"+u.GetName()+".yaml", u); err != nil {
					return err
				}
			}
		}
	}
	if err := g.snapshots(ctx); err != nil {
		return err
	}
	pvs, err := g.o.Kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		g.skip("PersistentVolumes: %v", err)
	} else {
		for i := range pvs.Items {
			pv := &pvs.Items[i]
			if _, ok := shareclient.VolumeOf(pv, operator.DriverName); !ok {
				continue
			}
			pv.APIVersion, pv.Kind = "v1", "PersistentVolume"
			if err := g.writeObject("cluster-scoped/persistentvolumes/"+pv.Name+".yaml", pv); err != nil {
				return err
			}
			if ref := pv.Spec.ClaimRef; ref != nil {
				pvc, err := g.o.Kube.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
				if err != nil {
					g.skip("PersistentVolumeClaim %s/%s: %v", ref.Namespace, ref.Name, err)
					continue
				}
				pvc.APIVersion, pvc.Kind = "v1", "PersistentVolumeClaim"
				if err := g.writeObject("namespaces/"+ref.Namespace+"/persistentvolumeclaims/"+ref.Name+".yaml", pvc); err != nil {
					return err
				}
			}
		}
	}
	csiNodes, err := g.o.Kube.StorageV1().CSINodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		g.skip("CSINodes: %v", err)
		return nil
	}
	for i := range csiNodes.Items {
		n := &csiNodes.Items[i]
		n.APIVersion, n.Kind = "storage.k8s.io/v1", "CSINode"
		if err := g.writeObject("cluster-scoped/csinodes/"+n.Name+".yaml", n); err != nil {
			return err
		}
	}
	return nil
}

// machineAPI gathers the MachineSets and the ControlPlaneMachineSet, whose annotations hold the
// attachment records and whose provider specs the storage network.
func (g *gatherer) machineAPI(ctx context.Context) error {
	for _, gvr := range []schema.GroupVersionResource{machineSetGVR, controlPlaneGVR} {
		list, err := g.o.Dynamic.Resource(gvr).Namespace("openshift-machine-api").List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			g.skip("%s: %v", gvr.Resource, err)
			continue
		}
		for i := range list.Items {
			u := &list.Items[i]
			if err := g.writeObject("namespaces/openshift-machine-api/"+gvr.Group+"/"+gvr.Resource+"/"+u.GetName()+".yaml", u); err != nil {
				return err
			}
		}
	}
	return nil
}

// namespaces gathers the operator's and the driver's namespaces: workloads, pods with their
// logs, and events.
func (g *gatherer) namespaces(ctx context.Context) error {
	for _, ns := range Namespaces {
		if _, err := g.o.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			if !apierrors.IsNotFound(err) {
				g.skip("namespace %s: %v", ns, err)
			}
			continue
		}
		base := "namespaces/" + ns + "/"
		if deps, err := g.o.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for i := range deps.Items {
				d := &deps.Items[i]
				d.APIVersion, d.Kind = "apps/v1", "Deployment"
				if err := g.writeObject(base+"apps/deployments/"+d.Name+".yaml", d); err != nil {
					return err
				}
			}
		} else {
			g.skip("Deployments of %s: %v", ns, err)
		}
		if dss, err := g.o.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for i := range dss.Items {
				d := &dss.Items[i]
				d.APIVersion, d.Kind = "apps/v1", "DaemonSet"
				if err := g.writeObject(base+"apps/daemonsets/"+d.Name+".yaml", d); err != nil {
					return err
				}
			}
		} else {
			g.skip("DaemonSets of %s: %v", ns, err)
		}
		if events, err := g.o.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
			events.APIVersion, events.Kind = "v1", "EventList"
			for i := range events.Items {
				events.Items[i].ManagedFields = nil
			}
			if err := g.writeObject(base+"core/events.yaml", events); err != nil {
				return err
			}
		} else {
			g.skip("events of %s: %v", ns, err)
		}
		pods, err := g.o.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			g.skip("pods of %s: %v", ns, err)
			continue
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			p.APIVersion, p.Kind = "v1", "Pod"
			if err := g.writeObject(base+"pods/"+p.Name+"/"+p.Name+".yaml", p); err != nil {
				return err
			}
			if err := g.logs(ctx, base+"pods/"+p.Name+"/", p); err != nil {
				return err
			}
		}
	}
	return nil
}

// logs gathers each container's current log and, when it restarted, its previous one: the
// newest LogLimit bytes of each.
func (g *gatherer) logs(ctx context.Context, dir string, p *corev1.Pod) error {
	restarts := map[string]int32{}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		restarts[s.Name] = s.RestartCount
	}
	var containers []string
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		containers = append(containers, c.Name)
	}
	for _, c := range containers {
		for _, previous := range []bool{false, true} {
			if previous && restarts[c] == 0 {
				continue
			}
			name := "current.log"
			if previous {
				name = "previous.log"
			}
			limit := g.o.LogLimit
			stream, err := g.o.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c, Previous: previous, LimitBytes: &limit}).Stream(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				g.skip("log of %s/%s container %s (%s): %v", p.Namespace, p.Name, c, name, err)
				continue
			}
			b, err := io.ReadAll(io.LimitReader(stream, limit))
			stream.Close()
			if err != nil {
				g.skip("log of %s/%s container %s (%s): %v", p.Namespace, p.Name, c, name, err)
				continue
			}
			if err := g.write(dir+c+"/"+name, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// cloud gathers the shares of the driver's volumes and their access rules (never a rule's
// access key: the client does not read it).
func (g *gatherer) cloud(ctx context.Context) error {
	if g.o.Cloud == nil {
		g.skip("the shares and access rules of the driver's volumes: no cloud given (--os-cloud)")
		return nil
	}
	c, err := g.o.Cloud(ctx)
	if err != nil {
		g.skip("the shares and access rules of the driver's volumes: %v", err)
		return nil
	}
	if err := g.snapshots(ctx); err != nil {
		return err
	}
	pvs, err := g.o.Kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		g.skip("the shares of the driver's volumes: %v", err)
		return nil
	}
	for i := range pvs.Items {
		v, ok := shareclient.VolumeOf(&pvs.Items[i], operator.DriverName)
		if !ok || v.ShareID == "" {
			continue
		}
		share, err := c.Share(ctx, v.ShareID)
		if err != nil {
			if openstack.KindOf(err) == openstack.KindCanceled {
				return err
			}
			g.skip("share %s of volume %s: %v", v.ShareID, v.Name, err)
			continue
		}
		rules, err := c.AccessRules(ctx, v.ShareID)
		if err != nil {
			if openstack.KindOf(err) == openstack.KindCanceled {
				return err
			}
			g.skip("the access rules of share %s: %v", v.ShareID, err)
		}
		doc := struct {
			Volume      string                 `json:"volume"`
			Share       openstack.Share        `json:"share"`
			AccessRules []openstack.AccessRule `json:"accessRules"`
		}{v.Name, share, rules}
		if err := g.writeObject("cloud/shares/"+v.ShareID+".yaml", doc); err != nil {
			return err
		}
	}
	return nil
}

// snapshots writes the driver's VolumeSnapshotContents and the VolumeSnapshots bound to them:
// a snapshot that is not taken says why in its status and in the content's.
func (g *gatherer) snapshots(ctx context.Context) error {
	contents, err := g.o.Dynamic.Resource(snapshotContentGVR).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		g.skip("VolumeSnapshotContents: the cluster does not serve snapshot.storage.k8s.io/v1")
		return nil
	case err != nil:
		g.skip("VolumeSnapshotContents: %v", err)
		return nil
	}
	for i := range contents.Items {
		c := &contents.Items[i]
		if driver, _, _ := unstructured.NestedString(c.Object, "spec", "driver"); driver != operator.DriverName {
			continue
		}
		if err := g.writeObject("cluster-scoped/volumesnapshotcontents/"+c.GetName()+".yaml", c); err != nil {
			return err
		}
		ns, _, _ := unstructured.NestedString(c.Object, "spec", "volumeSnapshotRef", "namespace")
		name, _, _ := unstructured.NestedString(c.Object, "spec", "volumeSnapshotRef", "name")
		if ns == "" || name == "" {
			continue
		}
		vs, err := g.o.Dynamic.Resource(volumeSnapshotGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			g.skip("VolumeSnapshot %s/%s: %v", ns, name, err)
			continue
		}
		if err := g.writeObject("namespaces/"+ns+"/volumesnapshots/"+name+".yaml", vs); err != nil {
			return err
		}
	}
	return nil
}

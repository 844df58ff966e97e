package diagnose

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// Annotations the Machine API and Cluster API put on a Node: its Machine, as namespace/name.
const (
	machineAnnotation     = "machine.openshift.io/machine"
	capiMachineAnnotation = "cluster.x-k8s.io/machine"
	capiNamespaceAnno     = "cluster.x-k8s.io/cluster-namespace"
	machineSetLabel       = "machine.openshift.io/cluster-api-machineset"
	machineRoleLabel      = "machine.openshift.io/cluster-api-machine-role"
)

var machineGVR = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machines"}

// run holds what one Run has read.
type run struct {
	in     Inputs
	report *Report
	cloud  *cloudFacts // nil until asked
	nodes  map[string]*corev1.Node
}

// Run follows the chain from the target and returns every check made. The error is for a target
// that does not exist, a cluster that cannot be read, or a canceled context; what the cloud
// cannot answer is a check not made, with the reason.
func Run(ctx context.Context, in Inputs, t Target) (*Report, error) {
	r := &run{in: in, report: &Report{Target: t.Kind + "/" + t.Name, Checks: []Check{}}, nodes: map[string]*corev1.Node{}}
	var pods []corev1.Pod
	var claims []string
	switch t.Kind {
	case "pod":
		p, err := in.Kube.CoreV1().Pods(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, readError("Pod", t.Namespace, t.Name, err)
		}
		pods = []corev1.Pod{*p}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims = append(claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
		if len(claims) == 0 {
			return nil, fmt.Errorf("Pod %s/%s mounts no PersistentVolumeClaim: nothing of Manila's to diagnose", t.Namespace, t.Name)
		}
	case "pvc":
		if _, err := in.Kube.CoreV1().PersistentVolumeClaims(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{}); err != nil {
			return nil, readError("PersistentVolumeClaim", t.Namespace, t.Name, err)
		}
		claims = []string{t.Name}
		list, err := in.Kube.CoreV1().Pods(t.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the Pods of namespace %s: %w", t.Namespace, err)
		}
		for _, p := range list.Items {
			if slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
				return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == t.Name
			}) {
				pods = append(pods, p)
			}
		}
	case "volumesnapshot":
		if err := r.checkSnapshotTarget(ctx, t.Namespace, t.Name); err != nil {
			return nil, err
		}
		return r.report, ctx.Err()
	default:
		return nil, fmt.Errorf("target kind %q: want pod, pvc or volumesnapshot", t.Kind)
	}

	for i := range pods {
		p := &pods[i]
		r.add(judgePod(p, r.newestWarning(ctx, "Pod", p.Namespace, p.Name)))
	}
	// The nodes the pods run on, once each.
	var nodes []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	for _, claim := range claims {
		if err := r.checkClaim(ctx, t.Namespace, claim, nodes); err != nil {
			return nil, err
		}
	}
	for _, n := range nodes {
		if err := r.checkNode(ctx, n); err != nil {
			return nil, err
		}
	}
	if len(pods) == 0 {
		r.add(Check{Name: "node", Subject: "PersistentVolumeClaim " + t.Namespace + "/" + t.Name, Status: NotChecked,
			Evidence: "no pod mounts the claim: the nodes, the driver on them and the access rules for them are checked with diagnose pod/NAME"})
	}
	return r.report, ctx.Err()
}

func (r *run) add(c Check) { r.report.Checks = append(r.report.Checks, c) }

func readError(kind, ns, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s/%s not found", kind, ns, name)
	}
	return fmt.Errorf("reading %s %s/%s: %w", kind, ns, name, err)
}

// newestWarning is "Reason: message" of the newest Warning event about an object, "" if none.
func (r *run) newestWarning(ctx context.Context, kind, ns, name string) string {
	list, err := r.in.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": kind, "involvedObject.name": name, "type": corev1.EventTypeWarning}.String()})
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	newest := &list.Items[0]
	for i := range list.Items {
		if eventTime(&list.Items[i]).After(eventTime(newest).Time) {
			newest = &list.Items[i]
		}
	}
	return newest.Reason + ": " + strings.TrimSpace(newest.Message)
}

func eventTime(e *corev1.Event) metav1.Time {
	for _, t := range []metav1.Time{e.LastTimestamp, {Time: e.EventTime.Time}, e.FirstTimestamp} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp
}

// facts asks the cloud once: the client, the network Manila exports on with its export
// subnets, the share types the project sees.
func (r *run) facts(ctx context.Context) *cloudFacts {
	if r.cloud != nil {
		return r.cloud
	}
	f := &cloudFacts{}
	r.cloud = f
	if r.in.Cloud == nil {
		f.err = fmt.Errorf("%s", noCloud)
		return f
	}
	if f.client, f.err = r.in.Cloud(ctx); f.err != nil {
		return f
	}
	if d, err := f.client.Discover(ctx, openstack.DiscoverOptions{}); err == nil {
		best, err := d.StorageNetwork()
		var sne *openstack.StorageNetworkError
		switch {
		case err == nil:
			net := best.Network
			f.storage = &net
			f.addExportSubnets(best)
		case errors.As(err, &sne) && len(sne.Zones) > 0:
			// A storage network per zone: each Node is judged by its own zone's.
			f.zones = sne.Zones
			for _, z := range sne.Zones {
				for i := range z.Networks {
					f.addExportSubnets(&z.Networks[i])
				}
			}
		}
	}
	types, err := f.client.ShareTypes(ctx)
	f.typesErr = err
	f.shareTypeInfo = map[string]openstack.ShareType{}
	for _, t := range types {
		f.shareTypes = append(f.shareTypes, t.Name)
		f.shareTypeInfo[t.Name] = t
	}
	return f
}

// checkClaim checks a claim, its class and, once bound, its share, the share's access rules and
// the class's nfs-shareClient for each node.
func (r *run) checkClaim(ctx context.Context, ns, name string, nodes []string) error {
	pvc, err := r.in.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		r.add(Check{Name: "claim", Subject: "PersistentVolumeClaim " + ns + "/" + name, Status: Failed,
			Evidence: "the pod mounts it, but it does not exist", Fix: "kubectl create -n " + ns + " -f <the claim's manifest>"})
		return nil
	}
	if err != nil {
		return readError("PersistentVolumeClaim", ns, name, err)
	}
	r.add(judgeClaim(pvc, r.newestWarning(ctx, "PersistentVolumeClaim", ns, name)))
	if err := r.checkDataSource(ctx, pvc); err != nil {
		return err
	}
	// A bound claim whose class was deleted since still has its share: the chain goes on
	// without the class's nfs-shareClient.
	class, err := r.checkClass(ctx, pvc)
	if err != nil {
		return err
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil
	}
	pv, err := r.in.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return readError("PersistentVolume", "", pvc.Spec.VolumeName, err)
	}
	vol, ok := shareclient.VolumeOf(pv, operator.DriverName)
	if !ok {
		return nil // not a volume of the driver: nothing of Manila's to follow
	}
	share := cmp.Or(vol.ShareID, vol.ShareName)
	var rules []openstack.AccessRule
	var shared *openstack.Share
	f := r.facts(ctx)
	shareOK := false
	switch {
	case f.err != nil:
		r.add(Check{Name: "share", Subject: "share " + share, Status: NotChecked, Evidence: f.err.Error()})
	case vol.ShareID == "":
		r.add(Check{Name: "share", Subject: "share " + share, Status: NotChecked, Evidence: "the volume names its share by name only (a static volume)"})
	default:
		shared, shareOK = r.checkShare(ctx, f, vol.ShareID)
		if shareOK {
			if rules, err = f.client.AccessRules(ctx, vol.ShareID); err != nil {
				if openstack.KindOf(err) == openstack.KindCanceled {
					return err
				}
				r.add(Check{Name: "access rule", Subject: "share " + vol.ShareID, Status: NotChecked, Evidence: err.Error()})
				shareOK = false
			}
		}
	}
	for _, name := range nodes {
		n, err := r.node(ctx, name)
		if err != nil {
			return err
		}
		if n == nil {
			continue
		}
		if f.zones != nil && shared != nil {
			r.add(judgeZone(f.zones, shared, n))
		}
		addr, how := mountAddress(n, f.prefixes(), r.in.MachineNetworks)
		if !addr.IsValid() {
			r.add(Check{Name: "access rule", Subject: "Node " + name, Status: NotChecked, Evidence: "where it mounts from is not known: " + how})
			continue
		}
		if shareOK {
			sub, _ := f.exportSubnetOf(addr)
			r.add(judgeAccess(vol.ShareID, name, addr, how, rules, r.in.CloudName, sub.CIDR))
		}
		if class != nil {
			r.add(judgeShareClient(class.Name, name, addr, how, class.Parameters["nfs-shareClient"]))
		}
	}
	return nil
}

// checkClass checks the claim's StorageClass: it exists, it is the driver's, Manila offers its
// share type to the project, its provisioner Secret exists. It returns the class when the rest
// of the chain can follow.
func (r *run) checkClass(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	name := ""
	if pvc.Spec.StorageClassName != nil {
		name = *pvc.Spec.StorageClassName
	}
	c := Check{Name: "class", Subject: "StorageClass " + name}
	if name == "" {
		c.Subject, c.Status = "PersistentVolumeClaim "+pvc.Namespace+"/"+pvc.Name, Failed
		c.Evidence, c.Fix = "it names no StorageClass", "manila-setup storageclasses check  (then recreate the claim with storageClassName set)"
		r.add(c)
		return nil, nil
	}
	sc, err := r.in.Kube.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.Status, c.Evidence, c.Fix = Failed, "it does not exist", "kubectl get storageclass -l "+operator.LabelManagedBy+"="+operator.ManagedByValue+"  (recreate the claim with one of them)"
		if pvc.Status.Phase == corev1.ClaimBound {
			// A bound volume does not need its class any more; only new claims do.
			c.Status, c.Fix = NotChecked, ""
			c.Evidence = "it no longer exists: the claim is bound, so its volume does not need it, but new claims naming it stay Pending"
		}
		r.add(c)
		return nil, nil
	}
	if err != nil {
		return nil, readError("StorageClass", "", name, err)
	}
	if sc.Provisioner != operator.DriverName {
		c.Status, c.Evidence = NotChecked, fmt.Sprintf("its provisioner is %s, not %s: not a Manila class", sc.Provisioner, operator.DriverName)
		r.add(c)
		return nil, nil
	}
	var problems []string
	var fixes []string
	shareType := sc.Parameters["type"]
	f := r.facts(ctx)
	typeKnown := false
	switch {
	case shareType == "":
		problems, fixes = append(problems, "it names no share type (parameter type): the driver fails every claim"), append(fixes, "manila-setup storageclasses check")
	case f.err != nil || f.typesErr != nil:
	case !slices.Contains(f.shareTypes, shareType):
		problems = append(problems, fmt.Sprintf("share type %q is not one Manila offers to the project (it offers %s)", shareType, orNone(f.shareTypes)))
		fixes = append(fixes, fmt.Sprintf("openstack%s share type list; recreate the claim with a class of one of those types (the operator keeps one per type: kubectl get storageclass -l %s=%s)",
			osCloud(r.in.CloudName), operator.LabelManagedBy, operator.ManagedByValue))
	default:
		typeKnown = true
	}
	secretNS, secretName := sc.Parameters["csi.storage.k8s.io/provisioner-secret-namespace"], sc.Parameters["csi.storage.k8s.io/provisioner-secret-name"]
	if secretName != "" && r.in.Meta != nil {
		_, err := r.in.Meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(secretNS).Get(ctx, secretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			problems = append(problems, fmt.Sprintf("its provisioner Secret %s/%s does not exist", secretNS, secretName))
			fixes = append(fixes, "manila-setup operator status")
		}
	}
	if len(problems) > 0 {
		c.Status, c.Evidence, c.Fix = Failed, strings.Join(problems, "; "), strings.Join(fixes, "; ")
		r.add(c)
		return sc, nil
	}
	c.Status = Passed
	c.Evidence = fmt.Sprintf("provisioner %s, share type %q", operator.DriverName, shareType)
	switch {
	case typeKnown:
		c.Evidence += " offered by Manila"
	case f.err != nil:
		c.Evidence += " (not looked up: " + noCloud + ")"
	case f.typesErr != nil:
		c.Evidence += " (not looked up: " + f.typesErr.Error() + ")"
	}
	if secretName != "" {
		c.Evidence += fmt.Sprintf(", Secret %s/%s", secretNS, secretName)
	}
	r.add(c)
	return sc, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// checkShare checks the share: available, with export locations, each in a subnet of the
// storage network or not. It reports whether the share could be read.
func (r *run) checkShare(ctx context.Context, f *cloudFacts, id string) (*openstack.Share, bool) {
	c := Check{Name: "share", Subject: "share " + id}
	s, err := f.client.Share(ctx, id)
	if err != nil {
		if openstack.KindOf(err) == openstack.KindNotFound {
			c.Status, c.Evidence = Failed, "Manila does not have it (deleted, or in another project): the volume points at nothing"
			c.Fix = "kubectl delete pv <the volume>; recreate the claim"
		} else {
			c.Status, c.Evidence = NotChecked, err.Error()
		}
		r.add(c)
		return nil, false
	}
	if s.Status != "available" {
		c.Status, c.Evidence = Failed, fmt.Sprintf("status %s, not available", s.Status)
		c.Fix = fmt.Sprintf("openstack%s share show %s  (a share in error needs the cloud's administrator)", osCloud(r.in.CloudName), id)
		r.add(c)
		return &s, true
	}
	var where []string
	for _, e := range s.ExportLocations {
		loc := e.Path
		hosts, _ := openstack.ExportHosts(e.Path)
		for _, h := range hosts {
			if sub, ok := f.exportSubnetOf(h); ok {
				loc += fmt.Sprintf(" (subnet %s, %s)", cmp.Or(sub.Name, sub.ID), sub.CIDR)
			}
		}
		where = append(where, loc)
	}
	if len(where) == 0 {
		c.Status, c.Evidence = Failed, "available, but without an export location the project may see"
		c.Fix = fmt.Sprintf("openstack%s share export location list %s", osCloud(r.in.CloudName), id)
		r.add(c)
		return &s, true
	}
	c.Status = Passed
	c.Evidence = fmt.Sprintf("available, %d GiB, share type %s, exported at %s", s.Size, s.ShareType, strings.Join(where, ", "))
	if f.zones != nil {
		c.Evidence += ", in availability zone " + orUnknown(s.AvailabilityZone)
	}
	r.add(c)
	return &s, true
}

// node reads a Node once; nil when it does not exist (said by checkNode).
func (r *run) node(ctx context.Context, name string) (*corev1.Node, error) {
	if n, ok := r.nodes[name]; ok {
		return n, nil
	}
	n, err := r.in.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		r.nodes[name] = nil
		return nil, nil
	}
	if err != nil {
		return nil, readError("Node", "", name, err)
	}
	r.nodes[name] = n
	return n, nil
}

// checkNode checks a node the pods run on: Ready, made by a Machine (and which set), a port on
// the storage network, the driver's node plugins Ready there and registered in its CSINode.
func (r *run) checkNode(ctx context.Context, name string) error {
	n, err := r.node(ctx, name)
	if err != nil {
		return err
	}
	c := Check{Name: "node", Subject: "Node " + name}
	if n == nil {
		c.Status, c.Evidence = Failed, "the pod is bound to a Node that does not exist"
		r.add(c)
		return nil
	}
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	machine, set, role := r.machineOf(ctx, n)
	switch {
	case !ready:
		c.Status, c.Evidence, c.Fix = Failed, "not Ready", "kubectl describe node "+name
	default:
		c.Status, c.Evidence = Passed, "Ready"
	}
	if machine != "" {
		c.Evidence += "; Machine " + machine
		if set != "" {
			c.Evidence += " of " + set
		}
	} else {
		c.Evidence += "; no Machine names it (a node not made by the Machine API or Cluster API)"
	}
	r.add(c)
	r.checkStoragePort(ctx, n, set, role)
	return r.checkDriver(ctx, n)
}

// machineOf names a Node's Machine (namespace/name), its set and its role, from the
// annotations the Machine API's nodelink controller and Cluster API write.
func (r *run) machineOf(ctx context.Context, n *corev1.Node) (machine, set, role string) {
	if m := n.Annotations[machineAnnotation]; m != "" {
		machine = m
		ns, name, _ := strings.Cut(m, "/")
		if r.in.Meta != nil {
			if obj, err := r.in.Meta.Resource(machineGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				if s := obj.Labels[machineSetLabel]; s != "" {
					set = "MachineSet " + s
				}
				role = obj.Labels[machineRoleLabel]
				if role == "master" && set == "" {
					set = "the ControlPlaneMachineSet"
				}
			}
		}
		return machine, set, role
	}
	if m := n.Annotations[capiMachineAnnotation]; m != "" {
		return n.Annotations[capiNamespaceAnno] + "/" + m + " (Cluster API)", "", ""
	}
	return "", "", ""
}

// checkStoragePort checks that the node's server has a port on the storage network.
func (r *run) checkStoragePort(ctx context.Context, n *corev1.Node, set, role string) {
	c := Check{Name: "storage port", Subject: "Node " + n.Name}
	f := r.facts(ctx)
	if f.err == nil && f.zones != nil {
		r.checkZonePorts(ctx, f, n, set)
		return
	}
	switch {
	case f.err != nil:
		c.Status, c.Evidence = NotChecked, f.err.Error()
	case f.storage == nil:
		c.Status, c.Evidence = NotChecked, "the network Manila exports on is not known: no share is exported yet (manila-setup networks discover)"
	case serverID(n) == "":
		c.Status, c.Evidence = NotChecked, "the Node has no OpenStack providerID: its server is not known"
	}
	if c.Status != "" {
		r.add(c)
		return
	}
	id := serverID(n)
	ports, err := f.client.ServerPorts(ctx, id)
	if err != nil {
		c.Status, c.Evidence = NotChecked, err.Error()
		r.add(c)
		return
	}
	for _, p := range ports {
		if p.NetworkID == f.storage.ID {
			c.Status = Passed
			c.Evidence = fmt.Sprintf("server %s has port %s on network %s with %s", id, p.ID, f.storage.Label(), joinAddrs(p.FixedIPs))
			r.add(c)
			return
		}
	}
	c.Status = Failed
	c.Evidence = fmt.Sprintf("server %s has no port on network %s, where Manila exports: the mount times out (mount.nfs: Connection timed out) unless the export address is routed", id, f.storage.Label())
	switch {
	case strings.HasPrefix(set, "MachineSet "):
		c.Fix = fmt.Sprintf("manila-setup machinesets patch --network %s --name %s --rollout", f.storage.ID, strings.TrimPrefix(set, "MachineSet "))
	case role == "master":
		c.Fix = fmt.Sprintf("manila-setup controlplane patch --network %s --rollout", f.storage.ID)
	default:
		c.Fix = "manila-setup networks attach"
	}
	r.add(c)
}

// serverID is the server of a Node's providerID (openstack:///ID, or openstack://REGION/ID).
func serverID(n *corev1.Node) string {
	rest, ok := strings.CutPrefix(n.Spec.ProviderID, "openstack://")
	if !ok {
		return ""
	}
	return rest[strings.LastIndexByte(rest, '/')+1:]
}

func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// checkDriver checks the driver's node plugins on the node (the Manila one and its NFS
// partner): a Ready pod of each DaemonSet, and the node's CSINode listing the driver, which the
// kubelet writes once the plugin registered.
func (r *run) checkDriver(ctx context.Context, n *corev1.Node) error {
	c := Check{Name: "driver", Subject: "Node " + n.Name}
	ns := operator.DefaultNamespace
	var problems, seen []string
	for _, ds := range []string{operator.NodeDaemonSetName, operator.NFSNodeDaemonSetName} {
		d, err := r.in.Kube.AppsV1().DaemonSets(ns).Get(ctx, ds, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			problems = append(problems, fmt.Sprintf("DaemonSet %s/%s does not exist", ns, ds))
			continue
		}
		if err != nil {
			return readError("DaemonSet", ns, ds, err)
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			problems = append(problems, fmt.Sprintf("DaemonSet %s/%s: spec.selector: %v", ns, ds, err))
			continue
		}
		pods, err := r.in.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String(),
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
		if err != nil {
			return fmt.Errorf("listing the pods of DaemonSet %s/%s: %w", ns, ds, err)
		}
		var pod *corev1.Pod
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil {
				pod = &pods.Items[i]
			}
		}
		switch {
		case pod == nil:
			problems = append(problems, fmt.Sprintf("no pod of DaemonSet %s on the node (its nodeSelector or tolerations leave the node out: kubectl -n %s get daemonset %s -o yaml)", ds, ns, ds))
		case !podReady(pod):
			w := r.newestWarning(ctx, "Pod", ns, pod.Name)
			problems = append(problems, fmt.Sprintf("pod %s is %s, not Ready%s", pod.Name, orUnknown(string(pod.Status.Phase)), prefixed("; ", w)))
		default:
			seen = append(seen, pod.Name+" Ready")
		}
	}
	csiNode, err := r.in.Kube.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		problems = append(problems, "the node has no CSINode: its kubelet registered no CSI driver")
	case err != nil:
		return readError("CSINode", "", n.Name, err)
	case !slices.ContainsFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == operator.DriverName }):
		var names []string
		for _, d := range csiNode.Spec.Drivers {
			names = append(names, d.Name)
		}
		sort.Strings(names)
		problems = append(problems, fmt.Sprintf("its CSINode lists %s, not %s: the node plugin has not registered with the kubelet", orNone(names), operator.DriverName))
	default:
		seen = append(seen, "CSINode lists "+operator.DriverName)
	}
	if len(problems) > 0 {
		c.Status, c.Evidence = Failed, strings.Join(problems, "; ")
		c.Fix = "manila-setup operator status; kubectl -n " + ns + " get pods -o wide --field-selector spec.nodeName=" + n.Name
	} else {
		c.Status, c.Evidence = Passed, strings.Join(seen, ", ")
	}
	r.add(c)
	return nil
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

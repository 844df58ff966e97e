package diagnose

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// The judgements of the links, on facts already read: pure, so that each rule is tested alone.

// judgePod: a Running pod whose containers are ready has its volumes; otherwise the newest
// warning about it says what holds it (FailedMount carries mount.nfs's own words).
func judgePod(p *corev1.Pod, warning string) Check {
	c := Check{Name: "pod", Subject: "Pod " + p.Namespace + "/" + p.Name}
	node := p.Spec.NodeName
	if node == "" {
		node = "no node yet"
	}
	if p.Status.Phase == corev1.PodRunning && podReady(p) {
		c.Status, c.Evidence = Passed, fmt.Sprintf("Running and Ready on %s: its volumes are mounted", node)
		return c
	}
	c.Status = Failed
	c.Evidence = fmt.Sprintf("%s on %s", orUnknown(string(p.Status.Phase)), node)
	if w := waitingReason(p); w != "" {
		c.Evidence += ", " + w
	}
	if warning != "" {
		c.Evidence += "; newest warning: " + warning
		if m := ExplainMountError(warning); m != "" {
			c.Evidence += " (" + m + ")"
		}
	}
	c.Fix = "see the failed checks below; kubectl describe pod -n " + p.Namespace + " " + p.Name
	return c
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitingReason(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Waiting != nil && s.State.Waiting.Reason != "" {
			return "container " + s.Name + " " + s.State.Waiting.Reason
		}
	}
	return ""
}

// judgeClaim: Bound, or why not (the provisioner's newest warning).
func judgeClaim(pvc *corev1.PersistentVolumeClaim, warning string) Check {
	c := Check{Name: "claim", Subject: "PersistentVolumeClaim " + pvc.Namespace + "/" + pvc.Name}
	class := "no class"
	if pvc.Spec.StorageClassName != nil {
		class = "class " + *pvc.Spec.StorageClassName
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		c.Status, c.Evidence = Passed, fmt.Sprintf("Bound to PersistentVolume %s (%s)", pvc.Spec.VolumeName, class)
		return c
	}
	c.Status = Failed
	c.Evidence = fmt.Sprintf("%s (%s)", orUnknown(string(pvc.Status.Phase)), class)
	if warning != "" {
		c.Evidence += "; newest warning: " + warning
	} else {
		c.Evidence += "; no warning from the provisioner yet"
	}
	c.Fix = "see the class check below; kubectl describe pvc -n " + pvc.Namespace + " " + pvc.Name
	return c
}

// judgeAccess: the share's access rules against the address a node mounts from. Passed needs
// an ip rule, read-write, active, that admits the address. The driver (cloud-provider-openstack
// v1.35.0) does not wait for a rule to leave queued_to_apply, and a rule in error is silent: both
// are named, as is a read-only rule.
func judgeAccess(share, node string, addr netip.Addr, how string, rules []openstack.AccessRule, cloud string, exportSubnet netip.Prefix) Check {
	c := Check{Name: "access rule", Subject: fmt.Sprintf("share %s for Node %s", share, node)}
	var covering []openstack.AccessRule
	for _, r := range rules {
		if !strings.EqualFold(r.Type, "ip") {
			continue
		}
		p, err := shareclient.ParseRule(r.To)
		if err == nil && p.Contains(addr) {
			covering = append(covering, r)
		}
	}
	sort.SliceStable(covering, func(i, j int) bool { return rank(covering[i]) < rank(covering[j]) })
	target := addr.String() + "/" + fmt.Sprint(addr.BitLen())
	if exportSubnet.IsValid() {
		target = exportSubnet.String()
	}
	create := fmt.Sprintf("openstack%s share access create %s ip %s --access-level rw", osCloud(cloud), share, target)
	if len(covering) == 0 {
		c.Status = Failed
		c.Evidence = fmt.Sprintf("no ip rule admits %s (%s); the share's rules: %s", addr, how, describeRules(rules))
		if len(rules) == 0 {
			// What test/datapath sees on nfs-ganesha: the share's last rule gone, the export
			// goes, and a pod that had mounted it gets Stale file handle; a rule granted again
			// makes a new export, which the old mount does not find.
			c.Evidence += "; a pod that mounted it before its last rule went sees \"Stale file handle\" and must start again once a rule is back"
		}
		c.Fix = create
		return c
	}
	best := covering[0]
	what := fmt.Sprintf("rule %s (ip %s, %s, %s)", best.ID, best.To, best.Level, best.State)
	switch {
	case strings.EqualFold(best.Level, "rw") && strings.EqualFold(best.State, "active"):
		c.Status, c.Evidence = Passed, fmt.Sprintf("%s admits %s (%s)", what, addr, how)
	case !strings.EqualFold(best.Level, "rw"):
		c.Status = Failed
		c.Evidence = fmt.Sprintf("%s admits %s read-only: writes fail", what, addr)
		c.Fix = fmt.Sprintf("openstack%s share access delete %s %s && %s", osCloud(cloud), share, best.ID, create)
	case strings.EqualFold(best.State, "error"):
		c.Status = Failed
		c.Evidence = fmt.Sprintf("%s is in error: Manila could not apply it, and the driver does not say so", what)
		c.Fix = fmt.Sprintf("openstack%s share access delete %s %s && %s", osCloud(cloud), share, best.ID, create)
	default: // queued_to_apply, applying, new, queued_to_deny, denying
		c.Status = Failed
		c.Evidence = fmt.Sprintf("%s is not active yet: the driver does not wait for it, so a mount may be refused until Manila applies it", what)
		c.Fix = fmt.Sprintf("openstack%s share access list %s  (wait for active; if it stays, ask the cloud's administrator about the share's back end)", osCloud(cloud), share)
	}
	return c
}

// rank orders the rules admitting an address: the one that works first, then the nearest to
// working.
func rank(r openstack.AccessRule) int {
	rw := strings.EqualFold(r.Level, "rw")
	switch state := strings.ToLower(r.State); {
	case rw && state == "active":
		return 0
	case rw && state != "error":
		return 1
	case rw:
		return 2
	}
	return 3
}

func describeRules(rules []openstack.AccessRule) string {
	if len(rules) == 0 {
		return "none"
	}
	var s []string
	for _, r := range rules {
		s = append(s, fmt.Sprintf("%s %s %s %s", r.Type, r.To, r.Level, r.State))
	}
	return strings.Join(s, "; ")
}

// judgeShareClient: the class's nfs-shareClient against where a node mounts from. It is read once,
// when the driver creates a share: a class that leaves the node out gives every new claim a
// share that node cannot mount.
func judgeShareClient(class, node string, addr netip.Addr, how, value string) Check {
	c := Check{Name: "nfs-shareClient", Subject: fmt.Sprintf("StorageClass %s for Node %s", class, node)}
	if value == "" {
		c.Status, c.Evidence = Passed, "not set: the driver admits 0.0.0.0/0, every address (the operator's classes always set it)"
		return c
	}
	ps, err := shareclient.ParseValue(value)
	if err != nil {
		c.Status, c.Evidence = Failed, fmt.Sprintf("nfs-shareClient %q: %v: the driver fails every claim of the class", value, err)
		c.Fix = "manila-setup storageclasses check"
		return c
	}
	if inAny(addr, ps) {
		c.Status, c.Evidence = Passed, fmt.Sprintf("%s admits %s (%s)", value, addr, how)
		return c
	}
	c.Status = Failed
	c.Evidence = fmt.Sprintf("%s leaves out %s (%s): new claims of the class get shares this node cannot mount", value, addr, how)
	c.Fix = "manila-setup storageclasses check  (the operator's classes follow where the nodes mount from: manila-setup operator status)"
	return c
}

func osCloud(name string) string {
	if name == "" {
		return ""
	}
	return " --os-cloud " + name
}

func orUnknown(s string) string {
	if s == "" {
		return "phase unknown"
	}
	return s
}

// Package sclint checks StorageClasses of the Manila CSI driver for the mistakes the driver
// itself lets pass in silence: its parameter keys are case-sensitive and unknown keys are
// ignored (so `nfs-ShareClient`, the spelling of an often-copied example, leaves the share open
// to 0.0.0.0/0), a secret reference that names no Secret fails only when a claim is made, a
// share type Manila does not offer fails likewise, and an nfs-shareClient that leaves out the
// addresses the workers mount from (operator/shareclient) gives shares no node can mount. It only reads; the operator (a condition and
// Events) and `manila-setup storageclasses check` report what it finds.
package sclint

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/manila-setup/manila-setup/internal/editdistance"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// driverParameters are the keys the Manila CSI driver reads from a StorageClass (its
// ControllerVolumeContext, cloud-provider-openstack v1.35.0, pkg/csi/manila/options).
var driverParameters = []string{
	"type", "shareNetworkID", "autoTopology", "availability", "appendShareMetadata", "affinity",
	"antiAffinity", "groupID", "protocol",
	"cephfs-mounter", "cephfs-clientID", "cephfs-kernelMountOptions", "cephfs-fuseMountOptions",
	"nfs-shareClient",
}

// csiPrefix marks the parameters the external-provisioner itself reads; these are its keys.
const csiPrefix = "csi.storage.k8s.io/"

var csiParameters = []string{
	"fstype",
	"provisioner-secret-name", "provisioner-secret-namespace",
	"controller-publish-secret-name", "controller-publish-secret-namespace",
	"node-stage-secret-name", "node-stage-secret-namespace",
	"node-publish-secret-name", "node-publish-secret-namespace",
	"controller-expand-secret-name", "controller-expand-secret-namespace",
	"node-expand-secret-name", "node-expand-secret-namespace",
}

// requiredSecrets: the driver authenticates to Manila with the first and mounts with the second.
var requiredSecrets = []string{"provisioner", "node-stage"}

// Facts are what the checks compare with; an unknown fact skips its check.
type Facts struct {
	// ShareTypes Manila offers; nil when Manila was not asked.
	ShareTypes []string
	// SecretExists tells whether a Secret exists; known is false when it cannot be told (no
	// permission to read that namespace).
	SecretExists func(namespace, name string) (exists, known bool)
	// MountFrom is where the workers mount from (shareclient.Decide); nil when unknown.
	MountFrom *shareclient.Answer
	// ListAllowed: the driver takes a comma-separated nfs-shareClient (cloud-provider-openstack
	// v1.35.0 and later: one access rule per entry).
	ListAllowed bool
	// SecretNamespace is the only namespace whose Secrets the driver's controller may read (its
	// RBAC); "" when unknown (the platform's driver).
	SecretNamespace string
}

// recommended is the nfs-shareClient the rule gives, with why.
func (f Facts) recommended() string {
	if f.MountFrom == nil {
		return "the networks the workers mount from"
	}
	return fmt.Sprintf("%s (%s)", f.MountFrom.Value(f.ListAllowed), f.MountFrom.Reason)
}

// SecretExists asks the API server whether a Secret exists, by its metadata only (its content is
// never read); known is false when it cannot tell (no permission, the server failed).
func SecretExists(ctx context.Context, meta metadata.Interface, namespace, name string) (exists, known bool) {
	_, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, true
	case apierrors.IsNotFound(err):
		return false, true
	}
	return false, false
}

// Finding is one problem of one StorageClass.
type Finding struct {
	StorageClass string `json:"storageClass"`
	Parameter    string `json:"parameter,omitempty"`
	Problem      string `json:"problem"`
	Fix          string `json:"fix"`
}

func (f Finding) String() string {
	where := f.StorageClass
	if f.Parameter != "" {
		where += " " + f.Parameter
	}
	return where + ": " + f.Problem + "; " + f.Fix
}

// Check returns the findings of one StorageClass; none when it is not the Manila driver's.
func Check(sc *storagev1.StorageClass, facts Facts) []Finding {
	if sc.Provisioner != operator.DriverName {
		return nil
	}
	var out []Finding
	add := func(param, problem, fix string) {
		out = append(out, Finding{StorageClass: sc.Name, Parameter: param, Problem: problem, Fix: fix})
	}
	keys := make([]string, 0, len(sc.Parameters))
	for k := range sc.Parameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		known, suggestion := knownKey(k)
		switch {
		case known:
		case suggestion != "" && strings.EqualFold(k, suggestion):
			add(k, "the driver ignores this key: parameter keys are case-sensitive", "spell it "+suggestion)
		case suggestion != "":
			add(k, "the driver ignores this key: it reads no such parameter", "did you mean "+suggestion+"?")
		default:
			add(k, "the driver ignores this key: it reads no such parameter", "remove it, or see the Manila CSI driver's StorageClass parameters")
		}
	}

	for _, s := range requiredSecrets {
		name, ns := sc.Parameters[csiPrefix+s+"-secret-name"], sc.Parameters[csiPrefix+s+"-secret-namespace"]
		switch {
		case name == "":
			add(csiPrefix+s+"-secret-name", "missing: the driver has no credentials for this step", fmt.Sprintf("set it (and -namespace) to the driver's Secret, e.g. %s", operator.DriverSecretName))
		case ns == "":
			add(csiPrefix+s+"-secret-namespace", "missing: the Secret "+name+" cannot be found without it", "set the namespace of Secret "+name)
		case strings.Contains(name+ns, "${"):
			// Templated per claim: nothing to look up.
		case facts.SecretNamespace != "" && ns != facts.SecretNamespace:
			add(csiPrefix+s+"-secret-namespace", fmt.Sprintf("Secret %s/%s is outside namespace %s, the only one whose Secrets the driver's controller may read: claims of this class will fail (forbidden)", ns, name, facts.SecretNamespace),
				fmt.Sprintf("create the Secret in %s and point the class there", facts.SecretNamespace))
		case facts.SecretExists != nil:
			if exists, known := facts.SecretExists(ns, name); known && !exists {
				add(csiPrefix+s+"-secret-name", fmt.Sprintf("Secret %s/%s does not exist: claims of this class will fail", ns, name), "point it at the driver's Secret or create that Secret")
			}
		}
	}

	if facts.ShareTypes != nil {
		t := sc.Parameters["type"]
		if t == "" {
			t = "default" // the driver's default
		}
		if !slices.Contains(facts.ShareTypes, t) {
			add("type", fmt.Sprintf("Manila offers no share type %q to this project: claims of this class will fail", t),
				"use one of "+strings.Join(facts.ShareTypes, ", "))
		}
	}

	if client, ok := sc.Parameters["nfs-shareClient"]; !ok {
		add("nfs-shareClient", "not set: every share of this class is open to any address (the driver's default 0.0.0.0/0)",
			"set it to "+facts.recommended())
	} else if strings.Contains(client, ",") && !facts.ListAllowed {
		add("nfs-shareClient", fmt.Sprintf("%q is a list: this driver makes one Manila access rule of the whole value, which Manila refuses", client),
			"give one CIDR: "+facts.recommended())
	} else if rules, err := shareclient.ParseValue(client); err != nil {
		add("nfs-shareClient", err.Error(), "set it to "+facts.recommended())
	} else if facts.MountFrom != nil {
		if missing := shareclient.Missing(rules, facts.MountFrom.Clients); len(missing) > 0 {
			add("nfs-shareClient", fmt.Sprintf("%s leaves out %s, where the workers mount from: nodes there cannot mount the shares", client, shareclient.Join(missing)),
				"set it to "+facts.recommended())
		}
	}
	return out
}

// knownKey tells whether k is a parameter the driver or the provisioner reads; if not, the
// closest one, when close enough to be a typo.
func knownKey(k string) (bool, string) {
	candidates := driverParameters
	name := k
	if rest, ok := strings.CutPrefix(k, csiPrefix); ok {
		candidates, name = csiParameters, rest
	}
	if slices.Contains(candidates, name) {
		return true, ""
	}
	best, bestDist := "", 3 // more than two edits is not a typo
	for _, c := range candidates {
		if strings.EqualFold(c, name) {
			best, bestDist = c, 0
			break
		}
		if d := editdistance.Levenshtein(strings.ToLower(c), strings.ToLower(name)); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return false, ""
	}
	if name != k {
		best = csiPrefix + best
	}
	return false, best
}

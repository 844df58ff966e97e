package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

func clusterConfig(rv, installConfig string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: machinery.ClusterConfigNamespace, Name: machinery.ClusterConfigName, UID: "u1", ResourceVersion: rv},
		Data:       map[string]string{"install-config": installConfig},
	}
}

// TestInstallConfigParsedOncePerVersion: the install-config is parsed again only when its
// ConfigMap changes, and what is read follows the change.
func TestInstallConfigParsedOncePerVersion(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	ic := &installConfigs{lister: corelisters.NewConfigMapLister(idx)}
	if _, found := ic.parsed(); found || ic.clusterNetworks() != nil {
		t.Fatal("an install-config found while the cache has no cluster-config-v1")
	}
	const v1 = "networking:\n  machineNetwork:\n  - cidr: 10.0.0.0/16\n  serviceNetwork: [172.30.0.0/16]\n"
	if err := idx.Add(clusterConfig("1", v1)); err != nil {
		t.Fatal(err)
	}
	first, found := ic.parsed()
	if !found || first.err != nil || strings.Join(first.machine, ",") != "10.0.0.0/16" || len(ic.clusterNetworks()) != 2 {
		t.Fatalf("parsed %+v (found %v), want machine network 10.0.0.0/16 and two networks in all", first, found)
	}
	again, _ := ic.parsed()
	if &again.machine[0] != &first.machine[0] {
		t.Fatal("the same version of the ConfigMap was parsed again")
	}
	if cap(first.machine) != len(first.machine) {
		t.Fatal("the shared machine networks are not clipped: a caller's append would write into them")
	}
	if err := idx.Update(clusterConfig("2", "networking:\n  machineNetwork:\n  - cidr: 10.1.0.0/16\n")); err != nil {
		t.Fatal(err)
	}
	changed, _ := ic.parsed()
	if strings.Join(changed.machine, ",") != "10.1.0.0/16" {
		t.Fatalf("after the ConfigMap changed: machine networks %v, want 10.1.0.0/16", changed.machine)
	}
	if err := idx.Update(clusterConfig("3", "networking: {}\n")); err != nil {
		t.Fatal(err)
	}
	if broken, _ := ic.parsed(); broken.err == nil || !strings.Contains(broken.err.Error(), "machineNetwork") {
		t.Fatalf("an install-config without machine networks: error %v, want one naming networking.machineNetwork", broken.err)
	}
}

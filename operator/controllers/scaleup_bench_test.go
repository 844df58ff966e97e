package controllers

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// The scale-up of docs/performance.md, without a cluster: 500 worker Machines of one
// MachineSet as the Machine API writes them (the installer's providerSpec with the storage
// network added, a providerStatus, conditions, annotations, managedFields), 150 of them with a
// Node. BenchmarkScaleUpCache is what the informer keeps of them; BenchmarkScaleUpEvaluation is
// one evaluation of the rules over the caches (where the workers mount from, for the
// StorageClasses, and the storage network against the MachineSets and Nodes, for
// StorageNetworkReachable), which the operator runs once per coalescing window during a
// scale-up:
//
//	go test -run '^$' -bench ScaleUp -benchmem ./operator/controllers/

const (
	benchStorageNet = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4"
	benchMachines   = 500
	benchNodes      = 150
)

const benchProviderSpec = `{
  "apiVersion": "machine.openshift.io/v1alpha1", "kind": "OpenstackProviderSpec", "metadata": {"creationTimestamp": null},
  "availabilityZone": "nova", "cloudName": "openstack",
  "cloudsSecret": {"name": "openstack-cloud-credentials", "namespace": "openshift-machine-api"},
  "flavor": "m1.xlarge", "image": "ostest-8x2kq-rhcos",
  "networks": [{"filter": {}, "subnets": [{"filter": {"tags": "openshiftClusterID=ostest-8x2kq"}}]}, {"uuid": "` + benchStorageNet + `"}],
  "securityGroups": [{"filter": {}, "name": "ostest-8x2kq-worker"}],
  "serverGroupName": "ostest-8x2kq-worker-nova",
  "serverMetadata": {"Name": "ostest-8x2kq-worker", "openshiftClusterID": "ostest-8x2kq"},
  "tags": ["openshiftClusterID=ostest-8x2kq"], "trunk": true, "userDataSecret": {"name": "worker-user-data"}}`

func benchObject(t testing.TB, s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// benchMachine is Machine i as the Machine API leaves it once its server is up (and its Node
// joined, for the first benchNodes).
func benchMachine(t testing.TB, i int) *unstructured.Unstructured {
	name := fmt.Sprintf("ostest-8x2kq-worker-0-%05d", i)
	nodeRef := ""
	if i < benchNodes {
		nodeRef = fmt.Sprintf(`"nodeRef": {"kind": "Node", "name": %q, "uid": "6a2c0f0e-%08d"},`, name, i)
	}
	return &unstructured.Unstructured{Object: benchObject(t, fmt.Sprintf(`{
  "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
  "metadata": {"name": %[1]q, "namespace": "openshift-machine-api", "uid": "1f0b5c7e-%08[2]d", "resourceVersion": "%[2]d", "generation": 2,
    "creationTimestamp": "2026-11-27T10:00:00Z", "finalizers": ["machine.machine.openshift.io"],
    "labels": {"machine.openshift.io/cluster-api-cluster": "ostest-8x2kq", "machine.openshift.io/cluster-api-machine-role": "worker",
      "machine.openshift.io/cluster-api-machine-type": "worker", "machine.openshift.io/cluster-api-machineset": "ostest-8x2kq-worker-0",
      "machine.openshift.io/instance-type": "m1.xlarge", "machine.openshift.io/region": "regionOne", "machine.openshift.io/zone": "nova"},
    "annotations": {"machine.openshift.io/instance-state": "ACTIVE", "openstack-resourceId": "9b7f3e2a-%08[2]d"},
    "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "ostest-8x2kq-worker-0", "uid": "c0ffee00-0000", "controller": true, "blockOwnerDeletion": true}],
    "managedFields": [{"manager": "machineset-controller", "operation": "Update", "apiVersion": "machine.openshift.io/v1beta1", "time": "2026-11-27T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}},
      {"manager": "machine-controller-manager", "operation": "Update", "apiVersion": "machine.openshift.io/v1beta1", "time": "2026-11-27T10:01:00Z", "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {"f:addresses": {}, "f:phase": {}}}}]},
  "spec": {"lifecycleHooks": {}, "metadata": {}, "providerID": "openstack:///9b7f3e2a-%08[2]d", "providerSpec": {"value": %[3]s}},
  "status": {%[4]s
    "addresses": [{"type": "InternalIP", "address": "10.196.%[5]d.%[6]d"}, {"type": "InternalIP", "address": "172.16.%[5]d.%[6]d"}, {"type": "Hostname", "address": %[1]q}, {"type": "InternalDNS", "address": %[1]q}],
    "phase": "Running", "lastUpdated": "2026-11-27T10:02:00Z",
    "providerStatus": {"instanceId": "9b7f3e2a-%08[2]d", "instanceState": "ACTIVE", "conditions": [{"type": "MachineCreation", "status": "True", "reason": "MachineCreationSucceeded", "message": "Machine successfully created", "lastProbeTime": "2026-11-27T10:01:00Z", "lastTransitionTime": "2026-11-27T10:01:00Z"}]},
    "conditions": [{"type": "Drainable", "status": "True", "lastTransitionTime": "2026-11-27T10:00:00Z"},
      {"type": "InstanceExists", "status": "True", "reason": "InstanceExists", "message": "Instance exists", "lastTransitionTime": "2026-11-27T10:01:00Z"},
      {"type": "Terminable", "status": "True", "lastTransitionTime": "2026-11-27T10:00:00Z"}]}
}`, name, i, benchProviderSpec, nodeRef, i/250, i%250+2))}
}

func benchMachineSet(t testing.TB) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: benchObject(t, `{
  "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
  "metadata": {"name": "ostest-8x2kq-worker-0", "namespace": "openshift-machine-api", "uid": "c0ffee00-0000", "resourceVersion": "9"},
  "spec": {"replicas": 500, "template": {"spec": {"providerSpec": {"value": `+benchProviderSpec+`}}}}}`)}
}

// benchCaches are the informers' stores of the scale-up: the MachineSet and the Machines
// through transform (nil: as listed), and the Nodes as the node cache keeps them.
func benchCaches(t testing.TB, transform func(any) (any, error)) (machines, sets cache.Indexer, nodes []*corev1.Node) {
	machines = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	sets = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	add := func(idx cache.Indexer, obj any) {
		if transform != nil {
			var err error
			if obj, err = transform(obj); err != nil {
				t.Fatal(err)
			}
		}
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	add(sets, benchMachineSet(t))
	for i := 0; i < benchMachines; i++ {
		add(machines, benchMachine(t, i))
	}
	for i := 0; i < benchNodes; i++ {
		nodes = append(nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ostest-8x2kq-worker-0-%05d", i), Labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
			Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.196.%d.%d", i/250, i%250+2)}}},
		})
	}
	return machines, sets, nodes
}

func benchStorage() *storageNetworks {
	subnet := openstack.Subnet{ID: "5b7a3f55-4f83-4f7e-9d64-4f2f8b4f9a10", Name: "storage-subnet", CIDR: netip.MustParsePrefix("172.16.0.0/16"), IPVersion: 4, DHCP: true}
	return &storageNetworks{at: time.Now(), ranking: &openstack.Ranking{Candidates: []openstack.Candidate{{
		Network: openstack.Network{ID: benchStorageNet, Name: "storage", Subnets: []openstack.Subnet{subnet}}, Score: 100, Confidence: openstack.ConfidenceHigh,
		Exports: []openstack.NetworkExport{{Address: netip.MustParseAddr("172.16.0.20"), CIDR: subnet.CIDR, Shares: 1, Preferred: true}},
	}}}}
}

// benchForms are the two forms of the Machine cache: as the list and watch give the Machines,
// and through the informers' transform.
var benchForms = []struct {
	name      string
	transform func(any) (any, error)
}{{"as-listed", nil}, {"slimmed", machinery.SlimMachineAPI}}

// BenchmarkScaleUpCache: the heap the Machine cache holds after the scale-up (MiB-held), and
// what building it allocates, as listed and through the informers' transform.
func BenchmarkScaleUpCache(b *testing.B) {
	for _, c := range benchForms {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var held float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				machines, sets, _ := benchCaches(b, c.transform)
				runtime.GC()
				runtime.ReadMemStats(&after)
				held = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
				runtime.KeepAlive(machines)
				runtime.KeepAlive(sets)
			}
			b.ReportMetric(held, "MiB-held")
		})
	}
}

// BenchmarkScaleUpEvaluation: one evaluation of the rules over the caches of the scale-up.
func BenchmarkScaleUpEvaluation(b *testing.B) {
	for _, c := range benchForms {
		b.Run(c.name, func(b *testing.B) {
			machines, sets, nodes := benchCaches(b, c.transform)
			storage := benchStorage()
			src := &shareClientSource{given: []string{"10.196.0.0/16"}, storage: storage, crdExists: func(string) bool { return true },
				machineAPI: func(gvr schema.GroupVersionResource) (cache.GenericLister, bool) {
					if gvr == machinery.MachineGVR {
						return cache.NewGenericLister(machines, gvr.GroupResource()), true
					}
					return cache.NewGenericLister(sets, gvr.GroupResource()), true
				}}
			setList, err := src.cached(machinery.MachineSetGVR)
			if err != nil {
				b.Fatal(err)
			}
			network := storage.candidate().Network
			b.ReportAllocs()
			for b.Loop() {
				answer, err := src.answer()
				if err != nil {
					b.Fatal(err)
				}
				// Every Machine is attached: the workers mount from the storage subnet only.
				if len(answer.Clients) != 1 || answer.Clients[0] != netip.MustParsePrefix("172.16.0.0/16") {
					b.Fatalf("the workers mount from %v, want the storage subnet 172.16.0.0/16 only", answer.Clients)
				}
				r := judgeStorageNetwork(network, setList, []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")}, nodes)
				if r.workers != benchNodes {
					b.Fatalf("%d workers judged, want %d", r.workers, benchNodes)
				}
			}
		})
	}
}

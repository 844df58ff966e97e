//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/endpoints"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/regions"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/services"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestDriverUsesTheEndpointInterfaceOfCloudsYAML: a region of the cloud whose Manila has a public
// endpoint that refuses every connection (a public address the cluster cannot reach) and an
// internal one that works, as on clouds whose workloads reach the internal endpoints only. A
// clouds.yaml with `interface: internal` becomes the driver Secret the operator writes; the real
// driver provisions a claim with it. The same Secret without the endpoint interface (what it was
// before os-endpointType was written) leaves the claim Pending, the driver naming the public
// endpoint it could not reach.
func TestDriverUsesTheEndpointInterfaceOfCloudsYAML(t *testing.T) {
	cloud := testenv.NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The region, with Manila's endpoints only: the refused public one, the working internal one.
	pc, eo, err := testenv.Connect(ctx, testenv.CloudAdmin)
	if err != nil {
		t.Fatal(err)
	}
	identity, err := openstack.NewIdentityV3(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	region := "internal-only-" + testenv.NameSuffix()
	if _, err := regions.Create(ctx, identity, regions.CreateOpts{ID: region, Description: "manila-setup test: Manila on internal endpoints only"}).Extract(); err != nil {
		t.Fatalf("creating region %s: %v", region, err)
	}
	t.Cleanup(func() { _ = regions.Delete(context.Background(), identity, region).ExtractErr() })
	manilaURL, serviceID := sharev2Endpoint(t, ctx, identity)
	refused := refusedURL(t)
	for iface, url := range map[gophercloud.Availability]string{gophercloud.AvailabilityPublic: refused, gophercloud.AvailabilityInternal: manilaURL} {
		ep, err := endpoints.Create(ctx, identity, endpoints.CreateOpts{Availability: iface, Region: region, ServiceID: serviceID, URL: url}).Extract()
		if err != nil {
			t.Fatalf("creating the %s endpoint of sharev2 in %s: %v", iface, region, err)
		}
		t.Cleanup(func() { _ = endpoints.Delete(context.Background(), identity, ep.ID).ExtractErr() })
	}

	// The user's clouds.yaml for that region, asking for the internal endpoints.
	raw, err := os.ReadFile(cloud.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]map[string]any
	if err := yaml.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	demo := all["clouds"][testenv.CloudDemo]
	demo["region_name"], demo["interface"] = region, "internal"
	internal, err := yaml.Marshal(map[string]any{"clouds": map[string]any{"openstack": demo}})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := operator.ParseCredentials(internal, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	data := creds.DriverSecretData()
	if got := string(data["os-endpointType"]); got != "internal" || string(data["os-region"]) != region {
		t.Fatalf("driver Secret: os-endpointType %q, os-region %q; want internal and %s", got, data["os-region"], region)
	}

	sim := testenv.NewSimCluster(t, testenv.SimOptions{})
	drv := testenv.NewCSIController(t, testenv.CSIControllerOptions{Kubeconfig: sim.Kubeconfig, ClusterID: "endpoints"})
	alive := drv.Alive
	for _, tc := range []struct {
		ns     string
		secret map[string][]byte
	}{
		{"internal", data},
		{"public", without(data, "os-endpointType")},
	} {
		createNamespace(t, ctx, sim.Client, tc.ns)
		if _, err := sim.Client.CoreV1().Secrets(tc.ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: operator.DriverSecretName, Namespace: tc.ns}, Data: tc.secret}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sc := operator.BuildStorageClass("csi-manila-"+tc.ns, operator.ShareType{ID: cloud.Seed.ShareTypes["default"], Name: "default"},
			operator.StorageClassParams{Namespace: tc.ns, ShareClients: cloud.Seed.Subnets["storage-subnet"].CIDR})
		if _, err := sim.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pvc, err := sim.Client.CoreV1().PersistentVolumeClaims("internal").Create(ctx, rwxClaim("internal", "data", "csi-manila-internal", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := waitBound(t, ctx, sim.Client, pvc, 2*time.Minute, alive)
	t.Logf("through the internal endpoint: claim Bound to %s, share %s", pv.Name, pv.Spec.CSI.VolumeHandle)
	t.Cleanup(func() {
		_ = sim.Client.CoreV1().PersistentVolumeClaims("internal").Delete(context.Background(), pvc.Name, metav1.DeleteOptions{})
		_ = waitGone(context.Background(), 2*time.Minute, alive, func(ctx context.Context) error {
			_, err := sim.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return err
		})
	})

	// Without the interface the driver goes to the public endpoint, and the claim stays Pending.
	public, err := sim.Client.CoreV1().PersistentVolumeClaims("public").Create(ctx, rwxClaim("public", "data", "csi-manila-public", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(refused, "http://")
	var last string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = events(ctx, sim.Client, public.Namespace, public.Name)
		return strings.Contains(last, "ProvisioningFailed") && strings.Contains(last, host), nil
	}); err != nil {
		t.Fatalf("the claim of the Secret without os-endpointType: no ProvisioningFailed naming the public endpoint %s: %v\nevents:\n%s", host, err, last)
	}
	if c, err := sim.Client.CoreV1().PersistentVolumeClaims("public").Get(ctx, public.Name, metav1.GetOptions{}); err != nil || c.Status.Phase != corev1.ClaimPending {
		t.Errorf("the claim of the Secret without os-endpointType: %v, %v; want Pending", c.Status.Phase, err)
	}
	t.Logf("without os-endpointType the driver tries the public endpoint: %s", lastLine(last))
}

// sharev2Endpoint returns the URL of Manila's public sharev2 endpoint in RegionOne, which
// serves the internal one of the new region too, and the service's ID.
func sharev2Endpoint(t *testing.T, ctx context.Context, identity *gophercloud.ServiceClient) (string, string) {
	t.Helper()
	pages, err := services.List(identity, services.ListOpts{ServiceType: "sharev2"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := services.ExtractServices(pages)
	if err != nil || len(all) == 0 {
		t.Fatalf("no sharev2 service in the catalog: %v", err)
	}
	pages, err = endpoints.List(identity, endpoints.ListOpts{ServiceID: all[0].ID, Availability: gophercloud.AvailabilityPublic, RegionID: "RegionOne"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eps, err := endpoints.ExtractEndpoints(pages)
	if err != nil || len(eps) == 0 {
		t.Fatalf("no public sharev2 endpoint in RegionOne: %v", err)
	}
	return eps[0].URL, all[0].ID
}

// refusedURL is an http URL on a loopback port nothing listens on: every connection is refused.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return fmt.Sprintf("http://%s/v2", addr)
}

func without(m map[string][]byte, key string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

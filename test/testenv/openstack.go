package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/imagedata"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
)

// Cloud names written to clouds.yaml by test/env/openstack/up.sh.
const (
	CloudDemo    = "manila-setup"         // a member of project demo: what tests act as
	CloudAdmin   = "manila-setup-admin"   // the cloud admin
	CloudAppCred = "manila-setup-appcred" // the demo user through an application credential
)

// Cloud is the running loopback OpenStack: where its clouds.yaml is and what it was seeded with.
type Cloud struct {
	// CloudsFile is the clouds.yaml to pass as OS_CLIENT_CONFIG_FILE.
	CloudsFile string
	Seed       Seed
	// runDir is the cloud's MANILA_SETUP_RUN: its state is in runDir/openstack.
	runDir string
}

// Seed holds the IDs of what up.sh created, as written to seed.json.
type Seed struct {
	// Shape is the cloud's layout (test/env/openstack/shape.sh): "default", "director" or "zones".
	Shape string `json:"shape"`
	// StorageZone is the availability zone of the back end that exports on Networks["storage"]
	// ("" for Manila's default one).
	StorageZone string `json:"storage_zone"`
	// MoreStorageNetworks are the further storage networks of the shape, by name (the zones
	// shape: one per further back end, each exporting on its own).
	MoreStorageNetworks map[string]SeedStorageNetwork `json:"more_storage_networks"`
	ProjectID           string                        `json:"project_id"`
	KeystoneURL         string                        `json:"keystone_url"`
	Networks            map[string]string             `json:"networks"`
	Subnets             map[string]SeedSubnet         `json:"subnets"`
	SecurityGroups      map[string]string             `json:"security_groups"`
	ShareTypes          map[string]string             `json:"share_types"`
	Shares              map[string]SeedShare          `json:"shares"`
	// ComputeURL and ImageURL are Nova's (…/v2.1) and Glance's endpoints, also in the catalog.
	ComputeURL string `json:"compute_url"`
	ImageURL   string `json:"image_url"`
	// Flavors maps the seeded flavor names (m1.small, m1.large, m1.xlarge) to their IDs.
	Flavors map[string]string `json:"flavors"`
}

// SeedSubnet is one subnet of the seed.
type SeedSubnet struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	CIDR string `json:"cidr"`
}

// SeedShare is one Manila share of the seed, with its export paths ("IP:/path").
type SeedShare struct {
	ID              string   `json:"id"`
	ExportLocations []string `json:"export_locations"`
	// Zone is the share's availability zone, when the shape gives its back ends one; Network
	// names the further storage network it is exported on (MoreStorageNetworks).
	Zone    string `json:"zone"`
	Network string `json:"network"`
}

// SeedStorageNetwork is a further storage network of the seed, with the back end that exports
// on it and that back end's availability zone.
type SeedStorageNetwork struct {
	ID            string     `json:"id"`
	Zone          string     `json:"zone"`
	Backend       string     `json:"backend"`
	ExportAddress string     `json:"export_address"`
	Subnet        SeedSubnet `json:"subnet"`
}

// OpenStackDir is where test/env/openstack/up.sh keeps the running cloud's state.
func OpenStackDir() string { return filepath.Join(runDir(), "openstack") }

// LoadCloud reads clouds.yaml and seed.json of the running loopback OpenStack.
func LoadCloud() (*Cloud, error) { return loadCloudOf(runDir()) }

// loadCloudOf reads the cloud whose MANILA_SETUP_RUN is run.
func loadCloudOf(run string) (*Cloud, error) {
	dir := filepath.Join(run, "openstack")
	c := &Cloud{CloudsFile: filepath.Join(dir, "clouds.yaml"), runDir: run}
	if _, err := os.Stat(c.CloudsFile); err != nil {
		return nil, fmt.Errorf("loopback OpenStack is not running (%v): run test/env/openstack/up.sh (make test does)", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "seed.json"))
	if err != nil {
		return nil, fmt.Errorf("loopback OpenStack seed: %w: run test/env/openstack/up.sh", err)
	}
	if err := json.Unmarshal(b, &c.Seed); err != nil {
		return nil, fmt.Errorf("loopback OpenStack seed.json: %w", err)
	}
	return c, nil
}

// NewCloud returns the running loopback OpenStack, failing the test when it is not there, and
// points OS_CLIENT_CONFIG_FILE and OS_CLOUD at it for the duration of the test.
func NewCloud(t testing.TB) *Cloud {
	t.Helper()
	c, err := LoadCloud()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OS_CLIENT_CONFIG_FILE", c.CloudsFile)
	t.Setenv("OS_CLOUD", CloudDemo)
	return c
}

// NewCloudParallel is NewCloud for a test that runs beside others: it calls t.Parallel, where
// t.Setenv is refused, and points OS_CLIENT_CONFIG_FILE and OS_CLOUD at the cloud for the rest of
// the test binary instead. Every test of a run shares this one cloud, so the values are the same
// whoever sets them; a parallel test starts only once the package's other tests have ended, so
// none of them sees the change. What differs between parallel tests (their project's clouds.yaml,
// their cluster) they pass as options and flags, never through the environment.
func NewCloudParallel(t *testing.T) *Cloud {
	t.Helper()
	t.Parallel()
	c, err := LoadCloud()
	if err != nil {
		t.Fatal(err)
	}
	cloudEnvOnce.Do(func() {
		_ = os.Setenv("OS_CLIENT_CONFIG_FILE", c.CloudsFile)
		_ = os.Setenv("OS_CLOUD", CloudDemo)
	})
	return c
}

var cloudEnvOnce sync.Once

// ShapedCloudEnv names the variable that holds the MANILA_SETUP_RUN of the loopback cloud of a
// shape other than the default one (test/env/openstack/shape.sh), which make test brings up
// beside the default cloud: MANILA_SETUP_RUN_DIRECTOR for "director".
func ShapedCloudEnv(shape string) string { return "MANILA_SETUP_RUN_" + strings.ToUpper(shape) }

// NewShapedCloudParallel returns the running loopback cloud of the given shape, for a test that
// runs beside others (it calls t.Parallel). Nothing of it goes through the environment: the
// test passes its clouds.yaml (or its project's) explicitly, as NewCloudParallel's tests do.
func NewShapedCloudParallel(t *testing.T, shape string) *Cloud {
	t.Helper()
	t.Parallel()
	env := ShapedCloudEnv(shape)
	run := os.Getenv(env)
	if run == "" {
		t.Fatalf("no loopback cloud of the %s shape: %s is not set (make test brings one up; by hand: "+
			"MANILA_SETUP_RUN=DIR MANILA_SETUP_CLOUD_SHAPE=%s test/env/openstack/up.sh with ports of its own, then %s=DIR)", shape, env, shape, env)
	}
	c, err := loadCloudOf(run)
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed.Shape != shape {
		t.Fatalf("the cloud of %s=%s has the %q shape, want %q", env, run, c.Seed.Shape, shape)
	}
	return c
}

// Connect authenticates as the named cloud of the clouds.yaml that OS_CLIENT_CONFIG_FILE points
// at (NewCloud sets it), exactly as a user of the CLI would, and returns the provider client and
// the endpoint options that find each service in the catalog.
func Connect(ctx context.Context, cloud string) (*gophercloud.ProviderClient, gophercloud.EndpointOpts, error) {
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithCloudName(cloud))
	if err != nil {
		return nil, eo, fmt.Errorf("parsing clouds.yaml for %s: %w", cloud, err)
	}
	pc, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig))
	if err != nil {
		return nil, eo, fmt.Errorf("authenticating as %s: %w", cloud, err)
	}
	return pc, eo, nil
}

// UploadImage stores size bytes of zeros in Glance as a raw, bare image named name, owned by the
// user behind client, and returns its ID once Glance reports it active (and, after a failure,
// the ID of what it created, if anything, for the caller to delete). The loopback cloud's
// Nova runs the fake virt driver, which boots any image: 1 MiB is plenty.
func UploadImage(ctx context.Context, client *gophercloud.ServiceClient, name string, size int64) (string, error) {
	img, err := images.Create(ctx, client, images.CreateOpts{
		Name: name, DiskFormat: "raw", ContainerFormat: "bare",
	}).Extract()
	if err != nil {
		return "", fmt.Errorf("creating image %s: %w", name, err)
	}
	id := img.ID
	if err := imagedata.Upload(ctx, client, id, io.LimitReader(zeros{}, size)).ExtractErr(); err != nil {
		return id, fmt.Errorf("uploading %d bytes to image %s (%s): %w", size, name, id, err)
	}
	img, err = images.Get(ctx, client, id).Extract()
	if err != nil {
		return id, fmt.Errorf("getting image %s (%s) after its upload: %w", name, id, err)
	}
	if img.Status != images.ImageStatusActive || img.SizeBytes != size {
		return id, fmt.Errorf("image %s (%s) after its upload: status %s, %d bytes; want active, %d bytes",
			name, id, img.Status, img.SizeBytes, size)
	}
	return id, nil
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// NetworkClient is a Neutron client acting as the named cloud of $OS_CLIENT_CONFIG_FILE.
func NetworkClient(ctx context.Context, cloud string) (*gophercloud.ServiceClient, error) {
	pc, eo, err := Connect(ctx, cloud)
	if err != nil {
		return nil, err
	}
	return openstack.NewNetworkV2(pc, eo)
}

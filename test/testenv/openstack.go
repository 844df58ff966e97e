package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
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
}

// Seed holds the IDs of what up.sh created, as written to seed.json.
type Seed struct {
	ProjectID      string                `json:"project_id"`
	KeystoneURL    string                `json:"keystone_url"`
	Networks       map[string]string     `json:"networks"`
	Subnets        map[string]SeedSubnet `json:"subnets"`
	SecurityGroups map[string]string     `json:"security_groups"`
	ShareTypes     map[string]string     `json:"share_types"`
	Shares         map[string]SeedShare  `json:"shares"`
}

// SeedSubnet is one subnet of the seed.
type SeedSubnet struct {
	ID   string `json:"id"`
	CIDR string `json:"cidr"`
}

// SeedShare is one Manila share of the seed, with its export paths ("IP:/path").
type SeedShare struct {
	ID              string   `json:"id"`
	ExportLocations []string `json:"export_locations"`
}

// OpenStackDir is where test/env/openstack/up.sh keeps the running cloud's state.
func OpenStackDir() string { return filepath.Join(runDir(), "openstack") }

// LoadCloud reads clouds.yaml and seed.json of the running loopback OpenStack.
func LoadCloud() (*Cloud, error) {
	dir := OpenStackDir()
	c := &Cloud{CloudsFile: filepath.Join(dir, "clouds.yaml")}
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

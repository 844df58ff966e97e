//go:build integration

package controllers

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/sharetypes"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// ownProject is a Keystone project with a member user of one test's own: share types made
// private to it are seen by no other test, which share the loopback cloud and run at the same
// time (a public share type added by one test would become a StorageClass in another's cluster).
type ownProject struct {
	ID string
	// CloudsYAML is the user's clouds.yaml, cloud "openstack", authenticating at authURL.
	CloudsYAML []byte
	// Manila is the admin's Manila client (microversion 2.7: private share types).
	Manila *gophercloud.ServiceClient
}

func newOwnProject(t *testing.T, ctx context.Context, cloud *testenv.Cloud, authURL string) *ownProject {
	t.Helper()
	ao, eo, tlsc, err := clouds.Parse(clouds.WithCloudName(testenv.CloudAdmin), clouds.WithLocations(cloud.CloudsFile))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsc))
	if err != nil {
		t.Fatal(err)
	}
	identity, err := openstack.NewIdentityV3(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	manila, err := openstack.NewSharedFileSystemV2(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	manila.Microversion = "2.7"
	run := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()%1000000)
	project, err := projects.Create(ctx, identity, projects.CreateOpts{Name: "manila-setup-" + run, DomainID: "default"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = projects.Delete(context.Background(), identity, project.ID).ExtractErr() })
	password := "own-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	user, err := users.Create(ctx, identity, users.CreateOpts{Name: "manila-setup-" + run, DomainID: "default", Password: password, DefaultProjectID: project.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = users.Delete(context.Background(), identity, user.ID).ExtractErr() })
	pages, err := roles.List(identity, roles.ListOpts{Name: "member"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rl, _ := roles.ExtractRoles(pages)
	if len(rl) == 0 {
		t.Fatal("no member role")
	}
	if err := roles.Assign(ctx, identity, rl[0].ID, roles.AssignOpts{UserID: user.ID, ProjectID: project.ID}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	creds, err := yaml.Marshal(map[string]any{"clouds": map[string]any{"openstack": map[string]any{
		"auth": map[string]any{"auth_url": authURL, "username": user.Name, "password": password, "project_id": project.ID,
			"user_domain_id": "default"},
		"region_name": "RegionOne"}}})
	if err != nil {
		t.Fatal(err)
	}
	return &ownProject{ID: project.ID, CloudsYAML: creds, Manila: manila}
}

// privateShareType creates a DHSS=false share type that only the project sees, and returns a
// function that deletes it (also run at cleanup).
func (p *ownProject) privateShareType(t *testing.T, ctx context.Context, name string) (id string, remove func() error) {
	t.Helper()
	st, err := sharetypes.Create(ctx, p.Manila, shareTypeBody{"name": name, "share_type_access:is_public": false,
		"extra_specs": map[string]any{"driver_handles_share_servers": false}}).Extract()
	if err != nil {
		t.Fatalf("creating share type %s: %v", name, err)
	}
	if err := sharetypes.AddAccess(ctx, p.Manila, st.ID, sharetypes.AccessOpts{Project: p.ID}).ExtractErr(); err != nil {
		t.Fatalf("granting share type %s: %v", name, err)
	}
	removed := false
	remove = func() error {
		if removed {
			return nil
		}
		removed = true
		return sharetypes.Delete(context.Background(), p.Manila, st.ID).ExtractErr()
	}
	t.Cleanup(func() { _ = remove() })
	return st.ID, remove
}

// shareTypeBody is the body of a share type creation with the 2.7 microversion's names.
type shareTypeBody map[string]any

func (s shareTypeBody) ToShareTypeCreateMap() (map[string]any, error) {
	return map[string]any{"share_type": map[string]any(s)}, nil
}

// Package oracle runs openshift-install's own reading and validation of additionalNetworkIDs
// and additionalSecurityGroupIDs (github.com/openshift/installer v1.5.0-alpha.2) and
// manila-setup's over the same corpus, and demands that manila-setup rejects everything the
// installer rejects; where manila-setup rejects what the installer accepts, the rule it applied
// must be one of the documented stricter rules. It also hands every file manila-setup patches
// back to the installer, which must accept it and see the added IDs in every patched pool.
//
// It is a module of its own, so that the main module does not depend on the installer.
package oracle

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	osvalidation "github.com/openshift/installer/pkg/asset/installconfig/openstack/validation"
	"github.com/openshift/installer/pkg/types"
	"github.com/openshift/installer/pkg/types/conversion"
	"github.com/openshift/installer/pkg/types/defaults"
	"github.com/openshift/installer/pkg/types/openstack"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/installconfig"
)

var update = flag.Bool("update", false, "rewrite testdata/verdicts.txt")

// stricter are the rules under which manila-setup rejects what the installer accepts, and why;
// each is documented under its name in docs/installconfig.md ("Stricter than the installer").
var stricter = map[string]string{
	installconfig.RuleUUIDCanonical: "google/uuid also parses upper case, {...}, urn:uuid:... and 32 hex digits; Neutron and the machine controller compare the canonical form",
	installconfig.RuleDuplicateID:   "the installer does not look for duplicates; Nova would attach the network twice",
	installconfig.RuleAmbiguousKey:  "the installer silently takes one of two spellings of a field",
	installconfig.RulePlatform:      "manila-setup checks OpenStack install-configs only",
	installconfig.RuleYAMLSyntax:    "the installer reads only the first document and ignores malformed text after it",
}

const (
	addNetwork = "7097dc40-535a-4b98-a484-d00025ce73fb"
	addSG      = "4a30498e-d4d1-4710-86f7-9390abc0868f"
)

// installerVerdict reads data as openshift-install does (pkg/asset/installconfig
// AssetBase.LoadFromFile, for a direct user invocation) and runs its validation of the
// OpenStack machine pools (pkg/asset/installconfig/openstack.Validate) with a cloud that has
// every flavor, zone, network and security group the file names, so that only the checks of
// the ID lists remain.
func installerVerdict(data []byte) (cfg *types.InstallConfig, loadErr error, errs field.ErrorList) {
	return installerRead(data, true)
}

// installerRead is installerVerdict; without defaults the config has only the pools the file
// names (the installer adds a compute pool "worker" when there is none of that name).
func installerRead(data []byte, withDefaults bool) (cfg *types.InstallConfig, loadErr error, errs field.ErrorList) {
	defer func() {
		if r := recover(); r != nil {
			loadErr = fmt.Errorf("installer panicked: %v", r)
		}
	}()
	cfg = &types.InstallConfig{}
	if err := yaml.UnmarshalStrict(data, cfg, yaml.DisallowUnknownFields); err != nil {
		return nil, err, nil
	}
	if err := conversion.ConvertInstallConfig(cfg); err != nil {
		return nil, err, nil
	}
	if withDefaults {
		defaults.SetInstallConfigDefaults(cfg)
	}
	if cfg.Platform.OpenStack == nil {
		return cfg, nil, nil
	}
	for _, p := range mergedPools(cfg) {
		errs = append(errs, osvalidation.ValidateMachinePool(&p.pool, cloudFor(p.pool), p.controlPlane, p.path)...)
	}
	var ours field.ErrorList
	for _, e := range errs {
		if strings.Contains(e.Field, "additionalNetworkIDs") || strings.Contains(e.Field, "additionalSecurityGroupIDs") {
			ours = append(ours, e)
		}
	}
	return cfg, nil, ours
}

type mergedPool struct {
	pool         openstack.MachinePool
	controlPlane bool
	path         *field.Path
	name         string
}

// mergedPools is what openstack.Validate validates: each pool over defaultMachinePlatform.
func mergedPools(cfg *types.InstallConfig) []mergedPool {
	var out []mergedPool
	cp := openstack.MachinePool{Zones: []string{""}}
	cp.Set(cfg.Platform.OpenStack.DefaultMachinePlatform)
	if cfg.ControlPlane != nil {
		cp.Set(cfg.ControlPlane.Platform.OpenStack)
	}
	out = append(out, mergedPool{cp, true, field.NewPath("controlPlane", "platform", "openstack"), "master"})
	for i := range cfg.Compute {
		c := openstack.MachinePool{Zones: []string{""}}
		c.Set(cfg.Platform.OpenStack.DefaultMachinePlatform)
		c.Set(cfg.Compute[i].Platform.OpenStack)
		out = append(out, mergedPool{c, false, field.NewPath("compute").Index(i).Child("platform", "openstack"), cfg.Compute[i].Name})
	}
	return out
}

// cloudFor is a cloud where everything the pool names exists.
func cloudFor(p openstack.MachinePool) *osvalidation.CloudInfo {
	ci := &osvalidation.CloudInfo{
		Flavors:        map[string]osvalidation.Flavor{},
		ComputeZones:   p.Zones,
		Networks:       p.AdditionalNetworkIDs,
		SecurityGroups: p.AdditionalSecurityGroupIDs,
	}
	ci.Flavors[p.FlavorName] = osvalidation.Flavor{Flavor: flavors.Flavor{Name: p.FlavorName, RAM: 1 << 20, VCPUs: 64, Disk: 1000}}
	if p.RootVolume != nil {
		ci.VolumeZones, ci.VolumeTypes = p.RootVolume.Zones, p.RootVolume.Types
	}
	return ci
}

func corpus(t *testing.T) []string {
	files, err := filepath.Glob("../../installconfig/testdata/corpus/*.yaml")
	if err != nil || len(files) < 30 {
		t.Fatalf("corpus: %d files, %v", len(files), err)
	}
	sort.Strings(files)
	return files
}

// pathMatches says whether our error at ours covers the installer's error at theirs: the same
// field (our paths keep the file's spelling of keys, the installer's are canonical), or the
// defaultMachinePlatform list a pool inherits, at the same index.
func pathMatches(ours, theirs string) bool {
	if strings.EqualFold(ours, theirs) {
		return true
	}
	i := strings.Index(theirs, ".platform.openstack.")
	return i >= 0 && strings.EqualFold(ours, "platform.openstack.defaultMachinePlatform."+theirs[i+len(".platform.openstack."):])
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 140 {
		s = s[:137] + "..."
	}
	return s
}

func TestMain(m *testing.M) {
	logrus.SetOutput(io.Discard) // the installer's defaults log warnings we do not need
	os.Exit(m.Run())
}

func TestInstallerOracle(t *testing.T) {
	doc, err := os.ReadFile("../../docs/installconfig.md")
	if err != nil {
		t.Fatal(err)
	}
	var verdicts strings.Builder
	disagreements := map[string][]string{}
	for _, path := range corpus(t) {
		name := filepath.Base(path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, loadErr, theirs := installerVerdict(data)
		_, ours := installconfig.Check(name, data)

		installer := "accepts"
		switch {
		case loadErr != nil:
			installer = "rejects: " + oneLine(loadErr.Error())
		case len(theirs) > 0:
			installer = fmt.Sprintf("rejects: %d list errors, first %s", len(theirs), oneLine(theirs[0].Error()))
		}
		var rules []string
		for _, p := range ours {
			if p.Severity == installconfig.SeverityError && !slices.Contains(rules, p.Rule()) {
				rules = append(rules, p.Rule())
			}
		}
		sort.Strings(rules)
		fmt.Fprintf(&verdicts, "%s\n  installer:    %s\n  manila-setup: %d errors %v\n", name, installer, ours.Errors(), rules)

		// 1. Everything the installer rejects, we reject.
		if installer != "accepts" && ours.Errors() == 0 {
			t.Errorf("%s: the installer rejects it (%s), manila-setup accepts it", name, installer)
		}
		// 2. Each list error of the installer is one of ours, at the same place.
		for _, e := range theirs {
			found := false
			for _, p := range ours {
				if p.Severity == installconfig.SeverityError && pathMatches(p.Field, e.Field) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: the installer reports %v; manila-setup has no error there:\n%s", name, e, ours.Text(name))
			}
		}
		// 3. Where we are stricter, the rule is a documented stricter rule.
		if installer == "accepts" {
			for _, p := range ours {
				if p.Severity != installconfig.SeverityError {
					continue
				}
				reason, ok := stricter[p.Rule()]
				if !ok {
					t.Errorf("%s: manila-setup rejects what the installer accepts, by rule %q, which is not a documented stricter rule: %s",
						name, p.Rule(), p.Text(name))
					continue
				}
				if !strings.Contains(string(doc), "`"+p.Rule()+"`") {
					t.Errorf("docs/installconfig.md does not document the stricter rule `%s` (%s)", p.Rule(), reason)
				}
				disagreements[p.Rule()] = append(disagreements[p.Rule()], name)
			}
		}
	}
	fmt.Fprintf(&verdicts, "\nmanila-setup is stricter than the installer on:\n")
	keys := mapsKeys(disagreements)
	sort.Strings(keys)
	for _, rule := range keys {
		files := slices.Compact(disagreements[rule])
		fmt.Fprintf(&verdicts, "  %s (%s): %s\n", rule, stricter[rule], strings.Join(files, ", "))
	}
	golden(t, "testdata/verdicts.txt", verdicts.String())
}

func mapsKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(want) != got {
		t.Errorf("verdicts differ from %s (go test -update rewrites it):\n%s", path,
			installconfig.UnifiedDiff(path, "got", want, []byte(got)))
	}
}

// TestInstallerReadsPatchedFiles: every file manila-setup patches is accepted by the installer,
// which sees the added IDs in every compute pool and keeps every ID each pool had before.
func TestInstallerReadsPatchedFiles(t *testing.T) {
	patched := 0
	for _, path := range corpus(t) {
		name := filepath.Base(path)
		data, _ := os.ReadFile(path)
		f, _ := installconfig.Parse(name, data)
		res, err := installconfig.Patch(f, installconfig.PatchOptions{Networks: []string{addNetwork}, SecurityGroups: []string{addSG}})
		var invalid *installconfig.InvalidError
		if errors.As(err, &invalid) {
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		patched++
		before, loadErr, _ := installerRead(data, false)
		after, loadErr2, errs := installerRead(res.Output, false)
		if _, err, errs2 := installerVerdict(res.Output); err != nil || len(errs2) > 0 {
			t.Errorf("%s: the installer rejects the patched file: %v %v", name, err, errs2)
			continue
		}
		if loadErr2 != nil || len(errs) > 0 {
			t.Errorf("%s: the installer rejects the patched file: %v %v", name, loadErr2, errs)
			continue
		}
		if loadErr != nil {
			// We patched what the installer could not read: only non-canonical IDs, rewritten.
			if res.Changes == nil {
				t.Errorf("%s: patched a file the installer rejects (%v) without rewriting it", name, loadErr)
			}
			continue
		}
		pb, pa := mergedPools(before), mergedPools(after)
		if len(pa) != len(pb) && !(len(pb) == 1 && len(pa) == 2) { // patch creates a worker pool when there is none
			t.Errorf("%s: %d pools before, %d after", name, len(pb), len(pa))
			continue
		}
		for i, p := range pa {
			if p.controlPlane {
				if i < len(pb) && !slices.Equal(p.pool.AdditionalNetworkIDs, pb[i].pool.AdditionalNetworkIDs) {
					t.Errorf("%s: the control plane changed", name)
				}
				continue
			}
			if !slices.Contains(p.pool.AdditionalNetworkIDs, addNetwork) || !slices.Contains(p.pool.AdditionalSecurityGroupIDs, addSG) {
				t.Errorf("%s: the installer does not see the added IDs in %s: %v %v", name, p.path, p.pool.AdditionalNetworkIDs, p.pool.AdditionalSecurityGroupIDs)
			}
			if i < len(pb) {
				for _, id := range append(pb[i].pool.AdditionalNetworkIDs, pb[i].pool.AdditionalSecurityGroupIDs...) {
					canonical, _ := installconfig.CanonicalID(id)
					if !slices.Contains(p.pool.AdditionalNetworkIDs, canonical) && !slices.Contains(p.pool.AdditionalSecurityGroupIDs, canonical) {
						t.Errorf("%s: %s lost %s", name, p.path, id)
					}
				}
			}
		}
	}
	if patched < 15 {
		t.Errorf("only %d corpus files were patched", patched)
	}
}

// TestInstallerPicksTheSpellingWeSay: where a field is spelled two ways, manila-setup names the
// spelling the installer uses; the installer must indeed use that one.
func TestInstallerPicksTheSpellingWeSay(t *testing.T) {
	data, err := os.ReadFile("../../installconfig/testdata/corpus/invalid-ambiguous-keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, problems := installconfig.Check("ic.yaml", data)
	var said string
	for _, p := range problems {
		if p.Rule() == installconfig.RuleAmbiguousKey {
			said = p.Detail
		}
	}
	cfg, loadErr, _ := installerVerdict(data)
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	got := cfg.Compute[0].Platform.OpenStack.AdditionalNetworkIDs
	// The file has additionalNetworkIDs: [837e...] and additionalNetworkIds: [a2c6...].
	want := []string{"a2c6e413-56e4-47d7-b06c-e8d49773801f"}
	if !slices.Equal(got, want) || !strings.HasSuffix(said, `uses only one of them ("additionalNetworkIds")`) {
		t.Errorf("the installer uses %v; manila-setup says: %s", got, said)
	}
}

package openstack

import (
	"context"
	"sort"
)

// CloudNames returns the entries of the clouds.yaml that Connect reads for cfg, sorted, and
// where that file is; what a picker offers before anything is authenticated. Nothing secret is
// returned.
func CloudNames(ctx context.Context, cfg Config) (names []string, source string, err error) {
	data, _, source, err := readCloudsYAML(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	entries, err := cloudEntries(data, source)
	if err != nil {
		return nil, source, err
	}
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, source, nil
}

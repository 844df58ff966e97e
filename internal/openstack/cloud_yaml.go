package openstack

import (
	"context"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/internal/inputfile"
)

// CloudYAML is one cloud of clouds.yaml, found as Connect finds it (the same search, secure.yaml
// merged), for handing on to a process that connects later (the operator's credentials Secret).
type CloudYAML struct {
	// Name is the cloud's name in clouds.yaml.
	Name string
	// Entry is the cloud's entry, secure.yaml's values merged in; "cacert" removed when CACert
	// holds its content.
	Entry map[string]any
	// CACert is the PEM of the cacert file the entry names, if any.
	CACert []byte
	// ClientCert and ClientKey are the PEM of the cert and key files the entry names (a client
	// certificate the cloud's endpoints ask for), if any; "cert" and "key" are then removed
	// from the entry, as "cacert" is.
	ClientCert, ClientKey []byte
	// Source is the clouds.yaml read.
	Source string
}

// ReadCloud returns the cloud cfg selects, without authenticating. Errors are *Error, and name
// the file and the cloud.
func ReadCloud(ctx context.Context, cfg Config) (*CloudYAML, error) {
	sel, err := selectCloud(ctx, cfg)
	if err != nil {
		return nil, err
	}
	data, secure, source, name := sel.data, sel.secure, sel.source, sel.name
	entry, err := rawCloud(data, name, source)
	if err != nil {
		return nil, err
	}
	if len(secure) > 0 {
		// secure.yaml holds the same structure, usually only the secrets; its values win.
		if sec, err := rawCloud(secure, name, "secure.yaml beside "+source); err == nil {
			mergeInto(entry, sec)
		}
	}
	out := &CloudYAML{Name: name, Entry: entry, Source: source}
	if ca, _ := entry["cacert"].(string); ca != "" {
		if !filepath.IsAbs(ca) && len(cfg.CloudsYAML) == 0 {
			ca = filepath.Join(filepath.Dir(source), ca)
		}
		pem, err := inputfile.ReadFile(ctx, ca, inputfile.CABundle)
		if err != nil {
			return nil, configError(err, "cloud %q in %s: its CA bundle %s cannot be read: %v", name, source, ca, unwrapPath(err))
		}
		out.CACert = pem
		delete(entry, "cacert")
	}
	for _, f := range []struct {
		key, what string
		kind      inputfile.Kind
		into      *[]byte
	}{{"cert", "client certificate", inputfile.ClientCert, &out.ClientCert}, {"key", "client key", inputfile.ClientKey, &out.ClientKey}} {
		path, _ := entry[f.key].(string)
		if path == "" {
			continue
		}
		if !filepath.IsAbs(path) && len(cfg.CloudsYAML) == 0 {
			path = filepath.Join(filepath.Dir(source), path)
		}
		pem, err := inputfile.ReadFile(ctx, path, f.kind)
		if err != nil {
			return nil, configError(err, "cloud %q in %s: its %s %s cannot be read: %v", name, source, f.what, path, unwrapPath(err))
		}
		*f.into = pem
		delete(entry, f.key)
	}
	if (out.ClientCert == nil) != (out.ClientKey == nil) {
		return nil, configError(nil, "cloud %q in %s: cert and key go together (a client certificate and its key); it names only one", name, source)
	}
	return out, nil
}

func rawCloud(data []byte, name, source string) (map[string]any, error) {
	var doc struct {
		Clouds map[string]map[string]any `json:"clouds"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, configError(err, "%s is not valid YAML: %s", source, firstLine(err.Error()))
	}
	entry, ok := doc.Clouds[name]
	if !ok {
		return nil, configError(nil, "%s has no cloud %q", source, name)
	}
	if entry == nil {
		entry = map[string]any{}
	}
	return entry, nil
}

// mergeInto copies src into dst, recursing into maps present in both.
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeInto(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// Marshal returns the cloud as a clouds.yaml with this one cloud, under the name given.
func (c *CloudYAML) Marshal(as string) ([]byte, error) {
	b, err := yaml.Marshal(map[string]any{"clouds": map[string]any{as: c.Entry}})
	if err != nil {
		return nil, fmt.Errorf("cloud %q: %w", c.Name, err)
	}
	return b, nil
}

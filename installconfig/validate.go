package installconfig

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/internal/editdistance"
	"github.com/manila-setup/manila-setup/internal/neutronid"
)

// Check loads and validates an install-config: every problem, in file order.
func Check(name string, data []byte) (*File, Problems) {
	f, problems := Parse(name, data)
	if f.root == nil {
		return f, problems
	}
	problems = append(problems, Validate(f)...)
	problems.sortByPosition()
	return f, problems
}

// Validate runs the offline checks on a loaded file. The problems are in the order found;
// Check sorts them by position.
func Validate(f *File) (problems Problems) {
	c := &checker{f: f}
	defer func() {
		if r := recover(); r != nil {
			problems = append(c.problems, newProblem(SeverityError, RuleInternal, field.ErrorTypeInternal, "", nil,
				fmt.Sprintf("internal error while checking the file (please report it): %v", r), 0, 0))
		}
	}()
	c.run()
	return c.problems
}

// checker walks the document once and collects problems and the model.
type checker struct {
	f        *File
	problems Problems
	model    model
	aliases  []*yaml.Node // alias nodes met by checkStructure
}

func (c *checker) add(sev Severity, rule string, t field.ErrorType, path *field.Path, value any, n *yaml.Node, detail string) {
	line, col := 0, 0
	if n != nil {
		line, col = n.Line, n.Column
	}
	p := ""
	if path != nil {
		p = path.String()
	}
	c.problems = append(c.problems, newProblem(sev, rule, t, p, value, detail, line, col))
}

func (c *checker) errorf(rule string, t field.ErrorType, path *field.Path, value any, n *yaml.Node, format string, a ...any) {
	c.add(SeverityError, rule, t, path, value, n, fmt.Sprintf(format, a...))
}

func (c *checker) warnf(rule string, t field.ErrorType, path *field.Path, value any, n *yaml.Node, format string, a ...any) {
	c.add(SeverityWarning, rule, t, path, value, n, fmt.Sprintf(format, a...))
}

func (c *checker) run() {
	root := c.f.root
	c.checkStructure(root, nil)
	if root.Kind != yaml.MappingNode {
		c.add(SeverityError, RuleNotMapping, field.ErrorTypeTypeInvalid, nil, nil, root,
			fmt.Sprintf("the document must be a mapping (an install-config), not %s", kindName(root)))
		return
	}
	es, _, _ := entries(root)
	c.checkUnknownKeys(es, nil, installConfigKeys, levelRoot)
	c.checkPlatform(root, es)
	c.checkControlPlane(root, es)
	c.checkCompute(root, es)
	c.checkOverrides()
	c.model.machineNetworks = networkingCIDRs(es, "machineNetwork", true, DefaultMachineNetwork)
	c.model.clusterNetworks = networkingCIDRs(es, "clusterNetwork", true, DefaultClusterNetwork)
	c.model.serviceNetworks = networkingCIDRs(es, "serviceNetwork", false, DefaultServiceNetwork)
	c.checkAliases()
}

// checkAliases reports aliases that the installer's YAML reader refuses to expand: an alias
// inside the node it refers to (a recursive document), and documents whose aliases expand
// to far more than they hold ("billion laughs"). The YAML library's own decoder applies both
// rules, as the installer's does, so it is asked.
func (c *checker) checkAliases() {
	if len(c.aliases) == 0 {
		return
	}
	var v any
	err := c.f.doc.Decode(&v)
	if err == nil {
		return
	}
	msg := yamlMessage(err)
	if !strings.Contains(msg, "contains itself") && !strings.Contains(msg, "aliasing") {
		return
	}
	at := c.aliases[0]
	for _, a := range c.aliases {
		if strings.Contains(msg, "'"+a.Value+"'") {
			at = a
			break
		}
	}
	c.errorf(RuleType, field.ErrorTypeInvalid, nil, "*"+at.Value, at,
		"line %d: the alias *%s cannot be expanded: %s", at.Line, at.Value, msg)
}

// checkStructure reports what the installer's strict YAML reading rejects anywhere in the
// document: a key set twice in a mapping (also through << merges) and merges of non-mappings.
// It does not follow aliases: an anchored node is checked where it is defined.
func (c *checker) checkStructure(n *yaml.Node, path *field.Path) {
	switch n.Kind {
	case yaml.AliasNode:
		c.aliases = append(c.aliases, n)
	case yaml.SequenceNode:
		for i, item := range n.Content {
			c.checkStructure(item, indexPath(path, i))
		}
	case yaml.MappingNode:
		es, bad, overflow := entries(n)
		for _, b := range bad {
			c.errorf(RuleType, field.ErrorTypeTypeInvalid, childPath(path, "<<"), render(b), b,
				"a << merge needs a mapping or a list of mappings, not %s", kindName(resolveOr(b)))
		}
		if overflow {
			c.errorf(RuleType, field.ErrorTypeTooMany, childPath(path, "<<"), nil, n,
				"the << merges of this mapping expand to more than %d keys", mergeBudget)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := resolve(n.Content[i]); k == nil || k.Kind != yaml.ScalarNode {
				at := n.Content[i]
				c.errorf(RuleType, field.ErrorTypeTypeInvalid, childPath(path, render(at)), render(at), at,
					"a key must be a string or another scalar, not %s; the installer cannot read a document with such a key", kindName(resolveOr(at)))
			}
		}
		seen := make(map[string]entry, len(es))
		for _, e := range es {
			if e.key == nil || e.key.Kind != yaml.ScalarNode {
				continue
			}
			id := e.key.ShortTag() + "\x00" + e.key.Value
			if first, dup := seen[id]; dup {
				at, how := e.key, "set again"
				if e.merged {
					at, how = mergeSite(n), "set again by a << merge"
				}
				c.errorf(RuleDuplicateKey, field.ErrorTypeDuplicate, childPath(path, e.key.Value), e.key.Value, at,
					"%s (first on line %d); the installer reads YAML strictly and rejects a key set twice", how, first.key.Line)
				continue
			}
			seen[id] = e
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			name := k.Value
			if isMergeKey(k) {
				name = "<<"
			}
			c.checkStructure(v, childPath(path, name))
		}
	}
}

func mergeSite(m *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if isMergeKey(m.Content[i]) {
			return m.Content[i]
		}
	}
	return m
}

func resolveOr(n *yaml.Node) *yaml.Node {
	if r := resolve(n); r != nil {
		return r
	}
	return n
}

func childPath(p *field.Path, name string) *field.Path {
	name = pathKey(name)
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

// pathKey is a key as it appears in a field path: quoted when it holds characters that would
// make the path ambiguous or unreadable (spaces, dots, brackets, control characters).
func pathKey(name string) string {
	if name != "" && !strings.ContainsFunc(name, func(r rune) bool {
		return isControl(r) || r == ' ' || r == '.' || r == '[' || r == ']' || r == '"' || !unicode.IsPrint(r)
	}) {
		return name
	}
	return strconv.Quote(name)
}

func indexPath(p *field.Path, i int) *field.Path {
	if p == nil {
		return field.NewPath("").Index(i)
	}
	return p.Index(i)
}

// field finds a structural field (platform, compute, openstack, ...) in a mapping: it warns
// about a spelling that only case-insensitive matching accepts, reports two spellings at once,
// and returns the step of the entry the installer uses.
func (c *checker) field(parent *yaml.Node, es []entry, name string, sharedAbove bool, parentPath *field.Path) step {
	s, _ := c.fields(parent, es, name, sharedAbove, parentPath)
	return s
}

// fields is field, also returning the steps of the other spellings, which the installer
// decodes too (into the same struct, for mappings), so their content is checked as well.
func (c *checker) fields(parent *yaml.Node, es []entry, name string, sharedAbove bool, parentPath *field.Path) (step, []step) {
	found := lookup(es, name)
	if len(found) == 0 {
		return step{parent: parent, shared: sharedAbove, path: childPath(parentPath, name)}, nil
	}
	c.checkSpellings(found, name, parentPath)
	e := chosen(found)
	var others []step
	for _, o := range found {
		if o != e {
			others = append(others, stepFor(parent, o, sharedAbove, childPath(parentPath, o.key.Value)))
		}
	}
	return stepFor(parent, e, sharedAbove, childPath(parentPath, e.key.Value)), others
}

func (c *checker) checkSpellings(found []entry, name string, parentPath *field.Path) {
	for _, e := range found {
		if e.key.Value != name {
			c.warnf(RuleKeySpelling, field.ErrorTypeInvalid, childPath(parentPath, e.key.Value), e.key.Value, e.key,
				"the installer reads this key as %q because it matches keys case-insensitively, but tools that read keys exactly ignore it; spell it %q", name, name)
		}
	}
	distinct := map[string]bool{}
	for _, e := range found {
		distinct[e.key.Value] = true
	}
	// The same spelling twice is a duplicate key, reported by checkStructure.
	if len(distinct) > 1 {
		var spellings []string
		for _, e := range found {
			spellings = append(spellings, fmt.Sprintf("%q (line %d)", e.key.Value, e.key.Line))
		}
		last := found[len(found)-1]
		c.errorf(RuleAmbiguousKey, field.ErrorTypeDuplicate, childPath(parentPath, last.key.Value), last.key.Value, last.key,
			"%s is set %d times, as %s; the installer silently uses only one of them (%q)",
			name, len(found), strings.Join(spellings, ", "), chosen(found).key.Value)
	}
}

// mappingOrReport returns the mapping a step leads to, reporting a value of another type.
func (c *checker) mappingOrReport(s step, what string) *yaml.Node {
	if !s.present() {
		return nil
	}
	if resolve(s.raw) == nil {
		c.errorf(RuleType, field.ErrorTypeTypeInvalid, s.path, "*"+s.raw.Value, s.raw, "the alias refers to itself")
		return nil
	}
	if s.node == nil { // null: as if absent
		return nil
	}
	if s.node.Kind != yaml.MappingNode {
		c.errorf(RuleType, field.ErrorTypeTypeInvalid, s.path, render(s.node), s.node, "must be %s, not %s", what, kindName(s.node))
		return nil
	}
	return s.node
}

func (c *checker) checkPlatform(root *yaml.Node, es []entry) {
	ps := c.field(root, es, "platform", false, nil)
	c.model.platformStep = ps
	if !ps.present() || ps.node == nil {
		c.errorf(RulePlatform, field.ErrorTypeRequired, field.NewPath("platform"), nil, ps.key,
			"manila-setup checks OpenStack install-configs, and this one has no platform.openstack")
		return
	}
	pm := c.mappingOrReport(ps, "a mapping with the openstack platform settings")
	if pm == nil {
		return
	}
	pes, _, _ := entries(pm)
	c.checkUnknownKeys(pes, ps.path, platformKeys, levelPlatform)
	os := c.field(pm, pes, "openstack", ps.shared, ps.path)
	c.model.osStep = os
	if !os.present() {
		var others []string
		for _, e := range pes {
			if e.key != nil && isKnown(e.key.Value, platformKeys) {
				others = append(others, e.key.Value)
			}
		}
		typo := false
		for _, e := range pes {
			if e.key != nil && nearTypo(e.key.Value, []string{"openstack"}, platformKeys) != "" {
				typo = true // already reported as an unknown key
			}
		}
		switch {
		case typo:
		case len(others) > 0:
			c.errorf(RulePlatform, field.ErrorTypeNotSupported, ps.path, others[0], ps.key,
				"manila-setup checks OpenStack install-configs; supported values: \"openstack\"")
		default:
			c.errorf(RulePlatform, field.ErrorTypeRequired, os.path, nil, ps.key,
				"manila-setup checks OpenStack install-configs, and this one has no platform.openstack")
		}
		return
	}
	if os.node == nil && resolve(os.raw) != nil {
		c.errorf(RulePlatform, field.ErrorTypeRequired, os.path, nil, os.key,
			"is null; it must be a mapping with the OpenStack settings (at least cloud)")
		return
	}
	om := c.mappingOrReport(os, "a mapping with the OpenStack settings")
	if om == nil {
		return
	}
	oes, _, _ := entries(om)
	c.checkUnknownKeys(oes, os.path, openstackPlatformKeys, levelOpenStackPlatform)
	dmp, others := c.fields(om, oes, "defaultMachinePlatform", os.shared, os.path)
	def := &pool{kind: DefaultPool, path: dmp.path, openstack: dmp}
	c.model.def = def
	if m := c.mappingOrReport(dmp, "a mapping (an OpenStack machine pool)"); m != nil {
		c.checkPoolOpenStack(def, m)
	}
	for _, o := range others {
		if m := c.mappingOrReport(o, "a mapping (an OpenStack machine pool)"); m != nil {
			c.checkPoolOpenStack(&pool{kind: DefaultPool, path: o.path, openstack: o}, m)
		}
	}
}

func (c *checker) checkControlPlane(root *yaml.Node, es []entry) {
	s := c.field(root, es, "controlPlane", false, nil)
	c.model.cpStep = s
	p := &pool{kind: ControlPlanePool, path: s.path, nodeStep: s, name: "master"}
	c.model.controlPlane = p
	m := c.mappingOrReport(s, "a mapping (the control plane machine pool)")
	if m == nil {
		return
	}
	p.node = m
	c.checkPool(p, m)
}

func (c *checker) checkCompute(root *yaml.Node, es []entry) {
	s := c.field(root, es, "compute", false, nil)
	c.model.computeStep = s
	if !s.present() || s.node == nil {
		if s.present() && resolve(s.raw) == nil {
			c.errorf(RuleType, field.ErrorTypeTypeInvalid, s.path, "*"+s.raw.Value, s.raw, "the alias refers to itself")
		}
		return
	}
	if s.node.Kind != yaml.SequenceNode {
		c.errorf(RuleType, field.ErrorTypeTypeInvalid, s.path, render(s.node), s.node,
			"must be a list of machine pools, not %s", kindName(s.node))
		return
	}
	for i, item := range s.node.Content {
		is := step{parent: s.node, key: s.key, raw: item, path: s.path.Index(i),
			shared: s.shared || item.Kind == yaml.AliasNode}
		if r := resolve(item); r != nil && !isNull(r) {
			is.node = r
		}
		p := &pool{kind: ComputePool, index: i, path: is.path, nodeStep: is}
		c.model.compute = append(c.model.compute, p)
		if is.node == nil || is.node.Kind != yaml.MappingNode {
			what := "null"
			value := "null"
			at := item
			if is.node != nil {
				what, value, at = kindName(is.node), render(is.node), is.node
			}
			c.errorf(RuleType, field.ErrorTypeTypeInvalid, is.path, value, at, "must be a mapping (a machine pool), not %s", what)
			continue
		}
		p.node = is.node
		c.checkPool(p, is.node)
	}
}

// checkPool checks a compute or control-plane pool down to its platform.openstack.
func (c *checker) checkPool(p *pool, m *yaml.Node) {
	es, _, _ := entries(m)
	if names := lookup(es, "name"); len(names) > 0 {
		if n := resolve(chosen(names).value); n != nil && n.Kind == yaml.ScalarNode {
			p.name = n.Value
		}
	}
	c.checkUnknownKeys(es, p.path, machinePoolKeys, levelPool)
	var otherPlatforms []step
	p.platform, otherPlatforms = c.fields(m, es, "platform", p.nodeStep.shared, p.path)
	p.openstack = step{shared: p.platform.shared, path: p.platform.path.Child("openstack")}
	if pm := c.mappingOrReport(p.platform, "a mapping (the pool's platform settings)"); pm != nil {
		c.checkPoolPlatform(p, pm)
	}
	for _, o := range otherPlatforms {
		if pm := c.mappingOrReport(o, "a mapping (the pool's platform settings)"); pm != nil {
			c.checkPoolPlatform(&pool{kind: p.kind, index: p.index, path: p.path, platform: o}, pm)
		}
	}
}

// checkPoolPlatform checks a pool's platform mapping and its openstack section(s).
func (c *checker) checkPoolPlatform(p *pool, pm *yaml.Node) {
	pes, _, _ := entries(pm)
	c.checkUnknownKeys(pes, p.platform.path, machinePoolPlatformKeys, levelPoolPlatform)
	var others []step
	p.openstack, others = c.fields(pm, pes, "openstack", p.platform.shared, p.platform.path)
	if om := c.mappingOrReport(p.openstack, "a mapping (the pool's OpenStack settings)"); om != nil {
		c.checkPoolOpenStack(p, om)
	}
	for _, o := range others {
		if om := c.mappingOrReport(o, "a mapping (the pool's OpenStack settings)"); om != nil {
			c.checkPoolOpenStack(&pool{kind: p.kind, index: p.index, path: p.path, openstack: o}, om)
		}
	}
}

// checkPoolOpenStack checks the two lists of an OpenStack machine pool mapping.
func (c *checker) checkPoolOpenStack(p *pool, m *yaml.Node) {
	es, _, _ := entries(m)
	c.checkUnknownKeys(es, p.openstack.path, openstackMachinePoolKeys, levelPoolOpenStack)
	for _, k := range listKinds {
		found := lookup(es, k.Key())
		if len(found) == 0 {
			continue
		}
		c.checkSpellings(found, k.Key(), p.openstack.path)
		for _, e := range found {
			s := stepFor(m, e, p.openstack.shared, childPath(p.openstack.path, e.key.Value))
			l := &idList{kind: k, step: s}
			p.lists[k] = append(p.lists[k], l)
			c.checkList(l)
		}
	}
}

// checkList checks one additionalNetworkIDs / additionalSecurityGroupIDs value.
func (c *checker) checkList(l *idList) {
	s := l.step
	if resolve(s.raw) == nil {
		c.errorf(RuleType, field.ErrorTypeTypeInvalid, s.path, "*"+s.raw.Value, s.raw, "the alias refers to itself")
		return
	}
	if s.node == nil { // null: the installer treats it as absent
		l.valid = true
		return
	}
	n := s.node
	if n.Kind != yaml.SequenceNode {
		detail := fmt.Sprintf("must be a list of %s IDs (UUID v4), not %s", l.kind.noun(), kindName(n))
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
			detail += fmt.Sprintf("; write a list even for one ID: [%s]", n.Value)
		}
		c.errorf(RuleType, field.ErrorTypeTypeInvalid, s.path, render(n), n, "%s", detail)
		return
	}
	l.valid = true
	seen := map[string]int{}
	for i, raw := range n.Content {
		path := s.path.Index(i)
		item := resolve(raw)
		if item == nil {
			c.errorf(RuleType, field.ErrorTypeTypeInvalid, path, "*"+raw.Value, raw, "the alias refers to itself")
			l.valid = false
			continue
		}
		if item.Kind != yaml.ScalarNode || item.ShortTag() != "!!str" {
			l.valid = false
			value := render(item)
			detail := fmt.Sprintf("must be a %s ID (a UUID v4 string), not %s", l.kind.noun(), kindName(item))
			if item.Kind == yaml.MappingNode {
				detail += "; write the ID itself as the list item"
			}
			c.errorf(RuleType, field.ErrorTypeTypeInvalid, path, value, item, "%s", detail)
			continue
		}
		it := idItem{node: item, value: item.Value, path: path}
		canonical, verdict, version := neutronid.Check(item.Value)
		switch verdict {
		case neutronid.NotUUID:
			c.errorf(RuleUUID, field.ErrorTypeInvalid, path, item.Value, item, "%s", notUUIDDetail(item.Value, l.kind))
		case neutronid.WrongVersion:
			c.errorf(RuleUUIDVersion, field.ErrorTypeInvalid, path, item.Value, item,
				"must be a UUID v4, not a version %d UUID", version)
		case neutronid.NonCanonical:
			it.canonical = canonical
			c.errorf(RuleUUIDCanonical, field.ErrorTypeInvalid, path, item.Value, item,
				"must be written %q: the 36-character lower-case form Neutron uses (installconfig patch rewrites it)", canonical)
		default:
			it.canonical = canonical
		}
		key := neutronid.Key(item.Value)
		if first, dup := seen[key]; dup {
			c.errorf(RuleDuplicateID, field.ErrorTypeDuplicate, path, item.Value, item,
				"the same %s as %s", l.kind.noun(), s.path.Index(first).String())
		} else {
			seen[key] = i
		}
		l.items = append(l.items, it)
	}
}

// checkOverrides warns where a pool's own list silently drops IDs of defaultMachinePlatform:
// the installer replaces the default's list with the pool's, it does not merge them.
func (c *checker) checkOverrides() {
	def := c.model.def
	if def == nil {
		return
	}
	for _, k := range listKinds {
		dl := def.list(k)
		if dl == nil || len(dl.items) == 0 {
			continue
		}
		var ps []*pool
		if c.model.controlPlane != nil {
			ps = append(ps, c.model.controlPlane)
		}
		ps = append(ps, c.model.compute...)
		for _, p := range ps {
			pl := p.list(k)
			if pl == nil || pl.step.node == nil || !pl.valid {
				continue
			}
			has := map[string]bool{}
			for _, it := range pl.items {
				has[neutronid.Key(it.value)] = true
			}
			var missing []string
			for _, it := range dl.items {
				if !has[neutronid.Key(it.value)] {
					missing = append(missing, it.value)
				}
			}
			if len(missing) == 0 {
				continue
			}
			c.warnf(RuleOverridesDefault, field.ErrorTypeInvalid, pl.step.path, strings.Join(missing, ", "), pl.step.key,
				"replaces %s instead of adding to it, so these machines do not get the %s(s) only listed there",
				dl.step.path.String(), k.noun())
		}
	}
}

// Where checkUnknownKeys looks, and what it suggests.
type level int

const (
	levelRoot level = iota
	levelPlatform
	levelOpenStackPlatform
	levelPool
	levelPoolPlatform
	levelPoolOpenStack
)

// checkUnknownKeys reports keys the installer does not know that look like a misspelt or
// misplaced key this package depends on. Other unknown keys are left to the installer.
func (c *checker) checkUnknownKeys(es []entry, path *field.Path, known []string, lv level) {
	for _, e := range es {
		if e.key == nil || e.key.Kind != yaml.ScalarNode || isMergeKey(e.key) || isKnown(e.key.Value, known) {
			continue
		}
		key := e.key.Value
		if strings.EqualFold(key, "additionalNetworkIDs") || strings.EqualFold(key, "additionalSecurityGroupIDs") ||
			looksLikeList(key, known) >= 0 {
			k := Networks
			if strings.EqualFold(key, "additionalSecurityGroupIDs") || looksLikeList(key, known) == int(SecurityGroups) {
				k = SecurityGroups
			}
			var want string
			switch lv {
			case levelPoolOpenStack:
				want = k.Key()
			case levelPool:
				want = path.Child("platform", "openstack", k.Key()).String()
			case levelPoolPlatform:
				want = path.Child("openstack", k.Key()).String()
			case levelOpenStackPlatform:
				want = path.Child("defaultMachinePlatform", k.Key()).String()
			case levelPlatform:
				want = path.Child("openstack", "defaultMachinePlatform", k.Key()).String()
			case levelRoot:
				want = "platform.openstack.defaultMachinePlatform." + k.Key()
			}
			c.unknownKey(e, path, want)
			continue
		}
		var targets []string
		switch lv {
		case levelRoot:
			targets = []string{"compute", "controlPlane", "platform"}
		case levelPlatform, levelPoolPlatform:
			targets = []string{"openstack"}
		case levelPool:
			targets = []string{"platform"}
		case levelOpenStackPlatform:
			targets = []string{"defaultMachinePlatform"}
		}
		if t := nearTypo(key, targets, known); t != "" {
			c.unknownKey(e, path, t)
		}
	}
}

func (c *checker) unknownKey(e entry, path *field.Path, want string) {
	c.errorf(RuleUnknownKey, field.ErrorTypeInvalid, childPath(path, e.key.Value), e.key.Value, e.key,
		"unknown field, did you mean %q? The installer rejects unknown fields, and tools that read install-configs leniently (Hive, the assisted installer) drop them silently", want)
}

// normKey lower-cases a key and drops everything but letters and digits.
func normKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// looksLikeList says whether an unknown key is most likely one of the two lists: Networks,
// SecurityGroups, or -1. A key that is a near typo of another known key is not.
func looksLikeList(key string, known []string) int {
	n := normKey(key)
	if n == "" {
		return -1
	}
	for _, k := range known {
		if !strings.EqualFold(k, "additionalNetworkIDs") && !strings.EqualFold(k, "additionalSecurityGroupIDs") &&
			editdistance.Within(n, normKey(k), 2) <= 2 {
			return -1
		}
	}
	switch {
	case strings.Contains(n, "securitygroup") || strings.Contains(n, "secgroup") || strings.Contains(n, "securitygrp") ||
		strings.HasPrefix(n, "additionalsg") || n == "sg" || n == "sgs" || n == "sgids" || n == "sgid":
		return int(SecurityGroups)
	case strings.Contains(n, "network") || strings.HasPrefix(n, "additionalnet") || n == "nets" || n == "netids":
		return int(Networks)
	}
	dn := editdistance.Within(n, "additionalnetworkids", 5)
	ds := editdistance.Within(n, "additionalsecuritygroupids", 5)
	switch {
	case dn <= 4 && dn <= ds:
		return int(Networks)
	case ds <= 4:
		return int(SecurityGroups)
	}
	return -1
}

// nearTypo returns the target key that key is most likely a misspelling of, or "".
func nearTypo(key string, targets, known []string) string {
	n := normKey(key)
	if n == "" {
		return ""
	}
	best, bestD := "", 3
	for _, t := range targets {
		limit := 2
		if len(t) > 12 {
			limit = 3
		}
		if d := editdistance.Within(n, normKey(t), limit); d <= limit && d < bestD {
			best, bestD = t, d
		}
	}
	if best == "" {
		return ""
	}
	// A closer match with another known key wins: that is the installer's business.
	for _, k := range known {
		if k != best && editdistance.Within(n, normKey(k), bestD) < bestD {
			return ""
		}
	}
	return best
}

var hexAndDashes = regexp.MustCompile(`^[0-9a-fA-F-]+$`)

// notUUIDDetail says why a value is not a UUID, guessing at the likely mistake.
func notUUIDDetail(v string, k ListKind) string {
	switch {
	case strings.TrimSpace(v) != v && strings.TrimSpace(v) != "":
		if _, err := neutronid.Normalize(strings.TrimSpace(v)); err == nil {
			return "must be a UUID v4, without spaces around it"
		}
	case v == "":
		return "must be a UUID v4, not an empty string"
	case hexAndDashes.MatchString(v):
		return "must be a UUID v4: 32 hexadecimal digits as 8-4-4-4-12, this one is cut or mistyped"
	}
	return fmt.Sprintf("must be a UUID v4: the ID of the %s, not its name", k.noun())
}

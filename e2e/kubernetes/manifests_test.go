package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// variants are the directories 'kubectl apply -k' takes.
var variants = []string{"deployment", "statefulset"}

// leafBin is the leaf binary TestMain builds from this checkout.
var leafBin string

// TestMain runs the tests in the manifests' directory, deploy/kubernetes of
// the leaf module (this module sits in its e2e/), and builds the binary
// there, with the leaf module's own requirements.
func TestMain(m *testing.M) {
	if err := os.Chdir(filepath.Join("..", "..", "deploy", "kubernetes")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "leaf-k8s-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	leafBin = filepath.Join(dir, "leaf")
	build := exec.Command("go", "build", "-o", leafBin, "./cmd/leaf")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build leaf: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// object is one decoded manifest document.
type object struct {
	file string // relative to this directory
	kind string
	name string
	obj  metav1.Object // *corev1.ConfigMap, *appsv1.Deployment, ...
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeDocs decodes every YAML document in data strictly into the type of
// its apiVersion and kind: a field the type does not have (a misspelling, a
// field at the wrong level) and a key given twice are errors, as they are
// for 'kubectl apply' with server-side field validation.
func decodeDocs(file string, data []byte) ([]object, error) {
	var out []object
	for i, doc := range docSeparator.Split(string(data), -1) {
		if onlyComments(doc) {
			continue
		}
		where := fmt.Sprintf("%s, document %d", file, i+1)
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		var obj metav1.Object
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "apps/v1 StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		default:
			return nil, fmt.Errorf("%s: apiVersion %q kind %q is none this test knows", where, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", where, tm.Kind, err)
		}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("%s (%s): no metadata.name", where, tm.Kind)
		}
		out = append(out, object{file: file, kind: tm.Kind, name: obj.GetName(), obj: obj})
	}
	return out, nil
}

func onlyComments(doc string) bool {
	for line := range strings.Lines(doc) {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// kustomization is the part of kustomization.yaml these manifests use.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// resources lists the manifest files a kustomize directory applies, through
// the directories it names.
func resources(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("%s/kustomization.yaml: apiVersion %q kind %q", dir, k.APIVersion, k.Kind)
	}
	var files []string
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("%s/kustomization.yaml: resource %s: %v", dir, r, err)
		}
		if fi.IsDir() {
			files = append(files, resources(t, path)...)
		} else {
			files = append(files, path)
		}
	}
	return files
}

// bundle is what one variant applies.
type bundle struct {
	variant    string
	objects    []object
	configMaps map[string]*corev1.ConfigMap
}

func loadVariant(t *testing.T, variant string) *bundle {
	t.Helper()
	b := &bundle{variant: variant, configMaps: map[string]*corev1.ConfigMap{}}
	for _, file := range resources(t, variant) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeDocs(file, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			for _, seen := range b.objects {
				if seen.kind == o.kind && seen.name == o.name {
					t.Fatalf("%s: %s %s is in both %s and %s", variant, o.kind, o.name, seen.file, o.file)
				}
			}
			b.objects = append(b.objects, o)
			if cm, ok := o.obj.(*corev1.ConfigMap); ok {
				b.configMaps[cm.Name] = cm
			}
		}
	}
	return b
}

// workload is the Deployment or StatefulSet of a variant.
type workload struct {
	kind, name  string
	replicas    *int32
	selector    *metav1.LabelSelector
	template    corev1.PodTemplateSpec
	serviceName string // StatefulSet: its governing Service
}

func (b *bundle) workload(t *testing.T) workload {
	t.Helper()
	var ws []workload
	for _, o := range b.objects {
		switch w := o.obj.(type) {
		case *appsv1.Deployment:
			ws = append(ws, workload{o.kind, o.name, w.Spec.Replicas, w.Spec.Selector, w.Spec.Template, ""})
		case *appsv1.StatefulSet:
			ws = append(ws, workload{o.kind, o.name, w.Spec.Replicas, w.Spec.Selector, w.Spec.Template, w.Spec.ServiceName})
		}
	}
	if len(ws) != 1 {
		t.Fatalf("%s: %d workloads, want one", b.variant, len(ws))
	}
	return ws[0]
}

func of[T any](b *bundle) []T {
	var out []T
	for _, o := range b.objects {
		if v, ok := o.obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// container is the workload's leaf container.
func (w workload) container(t *testing.T) corev1.Container {
	t.Helper()
	for _, c := range w.template.Spec.Containers {
		if c.Name == "leaf" {
			return c
		}
	}
	t.Fatalf("%s %s has no container named leaf", w.kind, w.name)
	return corev1.Container{}
}

// TestManifestsDecodeStrictly: every YAML file here decodes strictly, and
// belongs to a variant (a file no kustomization names is never applied and
// never checked).
func TestManifestsDecodeStrictly(t *testing.T) {
	t.Parallel()
	applied := map[string]bool{}
	for _, v := range variants {
		for _, f := range resources(t, v) {
			applied[f] = true
		}
	}
	var n int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml") {
			return err
		}
		if d.Name() == "kustomization.yaml" {
			return nil // decoded strictly by resources
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objs, err := decodeDocs(path, data)
		if err != nil {
			t.Error(err)
		} else if len(objs) == 0 {
			t.Errorf("%s holds no object", path)
		}
		n += len(objs)
		if !applied[path] {
			t.Errorf("%s is in no variant's kustomization", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no manifest found")
	}

	// The decoder is as strict as it says.
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 3\n",
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  name: y\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n",
	} {
		if _, err := decodeDocs("sample", []byte(doc)); err == nil {
			t.Errorf("decoded without error:\n%s", doc)
		}
	}
}

// TestKubectlKustomize: where kubectl is installed, its kustomize builds
// each variant into the objects this test reads from the same files.
func TestKubectlKustomize(t *testing.T) {
	t.Parallel()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl: the variants' resources are still resolved and checked by the other tests")
	}
	for _, v := range variants {
		out, err := exec.Command(kubectl, "kustomize", v).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", v, err)
		}
		built, err := decodeDocs("kubectl kustomize "+v, out)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, o := range built {
			got = append(got, o.kind+"/"+o.name)
		}
		for _, o := range loadVariant(t, v).objects {
			want = append(want, o.kind+"/"+o.name)
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: kubectl kustomize builds %v, the files hold %v", v, got, want)
		}
	}
}

// TestVariants checks what each variant claims: three replicas, the probes,
// the Service and the budget selecting its pods, resources, a grace period
// above the shutdown, and a configuration leaf accepts.
func TestVariants(t *testing.T) {
	t.Parallel()
	secret := exampleSecret(t)
	for _, v := range variants {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			b := loadVariant(t, v)
			w := b.workload(t)
			c := w.container(t)
			podLabels := labels.Set(w.template.Labels)

			if w.replicas == nil || *w.replicas != 3 {
				t.Errorf("replicas %v, want 3", w.replicas)
			}
			if sel, err := metav1.LabelSelectorAsSelector(w.selector); err != nil || !sel.Matches(podLabels) {
				t.Errorf("the selector %v does not match the pod labels %v (%v)", w.selector, podLabels, err)
			}
			port := containerPort(t, c, "http")
			checkProbe(t, "liveness", c.LivenessProbe, "/healthz")
			checkProbe(t, "readiness", c.ReadinessProbe, "/readyz")
			checkProbe(t, "startup", c.StartupProbe, "/healthz")
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
					t.Errorf("no %s request", r)
				}
			}
			if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Error("no memory limit")
			}
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Error("the root file system is not read-only")
			}

			services := of[*corev1.Service](b)
			var clients *corev1.Service
			for _, s := range services {
				if !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
					t.Errorf("Service %s selects %v, not the pods %v", s.Name, s.Spec.Selector, podLabels)
				}
				for _, p := range s.Spec.Ports {
					if p.TargetPort.String() != "http" {
						t.Errorf("Service %s targets port %s, not the container's http", s.Name, p.TargetPort.String())
					}
				}
				if s.Name == "leaf" {
					clients = s
				}
			}
			if clients == nil || clients.Spec.ClusterIP == corev1.ClusterIPNone {
				t.Error("no Service leaf with a cluster IP for the clients")
			}
			if w.kind == "StatefulSet" {
				i := slices.IndexFunc(services, func(s *corev1.Service) bool { return s.Name == w.serviceName })
				if i < 0 || services[i].Spec.ClusterIP != corev1.ClusterIPNone {
					t.Errorf("serviceName %q names no headless Service of the variant", w.serviceName)
				}
			}
			pdbs := of[*policyv1.PodDisruptionBudget](b)
			if len(pdbs) != 1 {
				t.Fatalf("%d PodDisruptionBudgets, want one", len(pdbs))
			}
			if sel, err := metav1.LabelSelectorAsSelector(pdbs[0].Spec.Selector); err != nil || !sel.Matches(podLabels) {
				t.Errorf("the PodDisruptionBudget does not select the pods (%v)", err)
			}
			if mu := pdbs[0].Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1 of 3", mu)
			}

			r := runCheck(t, b.configMaps, secret, w, nil)
			if r.code != 0 {
				t.Fatalf("leaf serve --check refuses the %s's configuration (exit %d):\n%s", w.kind, r.code, r.stderr)
			}
			// Each pod of the StatefulSet is its ordinal's worker, claimed
			// in the etcd the Deployment leases from; runCheck plays pod
			// NAME-0.
			registry := "snowflake    etcd etcd:2379 /leaf/snowflake/leaf"
			if w.kind == "StatefulSet" {
				registry = "snowflake    ordinal worker 0 (leaf-0 + offset 0), claimed in etcd etcd:2379 /leaf/snowflake/leaf"
			}
			for _, want := range []string{
				"listen       0.0.0.0:" + strconv.Itoa(int(port)) + " (no TLS, admin token,",
				"segment      mysql leaf:xxxxx@tcp(mysql:3306)/leaf",
				registry,
			} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the summary does not say %q:\n%s", want, r.stdout)
				}
			}
			if r.stderr != "" {
				t.Errorf("leaf warns:\n%s", r.stderr)
			}
			checkGracePeriod(t, w, c, r.stdout)
		})
	}
}

// TestStatefulSetOrdinals: every pod of the StatefulSet, named as
// Kubernetes names them (the downward API gives leaf the pod's name), is
// the worker of its ordinal, claimed in etcd; the Deployment's pods, whose
// names end in a random suffix, and any name without an ordinal would be
// refused by the same configuration; and the replicas fit the layout.
func TestStatefulSetOrdinals(t *testing.T) {
	t.Parallel()
	b := loadVariant(t, "statefulset")
	w := b.workload(t)
	c := w.container(t)
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "LEAF_SNOWFLAKE_ORDINAL_HOSTNAME" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Fatalf("LEAF_SNOWFLAKE_ORDINAL_HOSTNAME is not the pod's name (fieldRef metadata.name): %+v", c.Env)
	}
	asPod := func(name string) func(*corev1.Container) {
		return func(c *corev1.Container) {
			c.Env[i] = corev1.EnvVar{Name: c.Env[i].Name, Value: name}
		}
	}
	for ord := range int(*w.replicas) {
		pod := w.name + "-" + strconv.Itoa(ord)
		r := runCheck(t, b.configMaps, exampleSecret(t), w, asPod(pod))
		want := fmt.Sprintf("snowflake    ordinal worker %d (%s + offset 0), claimed in etcd etcd:2379 /leaf/snowflake/leaf", ord, pod)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("pod %s: exit %d, want 0 and %q:\n%s%s", pod, r.code, want, r.stdout, r.stderr)
		}
	}
	for _, pod := range []string{"leaf-5d8f9c7b6-x2k4q", "leaf", "leaf-07"} {
		r := runCheck(t, b.configMaps, exampleSecret(t), w, asPod(pod))
		if r.code != 2 || !strings.Contains(r.stderr, `host name "`+pod+`" is not a StatefulSet pod name`) {
			t.Errorf("pod %s: exit %d, want 2 and a refusal of the name:\n%s", pod, r.code, r.stderr)
		}
	}
	r := runCheck(t, b.configMaps, exampleSecret(t), w, asPod(w.name+"-1024"))
	if r.code != 2 || !strings.Contains(r.stderr, "above the layout's maximum 1023") {
		t.Errorf("pod %s-1024: exit %d, want 2: the layout has no worker 1024:\n%s", w.name, r.code, r.stderr)
	}
}

// TestBadSettingsRefused: the check above fails when a manifest carries a
// setting leaf refuses, wherever it is.
func TestBadSettingsRefused(t *testing.T) {
	t.Parallel()
	b := loadVariant(t, "deployment")
	w := b.workload(t)
	tests := []struct {
		name   string
		change func(cms map[string]*corev1.ConfigMap, s *corev1.Secret, c *corev1.Container)
		want   string
	}{
		{"misspelled key in the ConfigMap", func(cms map[string]*corev1.ConfigMap, _ *corev1.Secret, _ *corev1.Container) {
			cms["leaf-config"].Data["leaf.yml"] += "snowflak:\n  registry: local\n"
		}, `unknown key "snowflak"`},
		{"token file the Secret does not provide", func(cms map[string]*corev1.ConfigMap, _ *corev1.Secret, _ *corev1.Container) {
			cm := cms["leaf-config"]
			cm.Data["leaf.yml"] = strings.Replace(cm.Data["leaf.yml"], "/admin-token", "/token", 1)
		}, "admin.token_file"},
		{"short admin token in the Secret", func(_ map[string]*corev1.ConfigMap, s *corev1.Secret, _ *corev1.Container) {
			s.Data["admin-token"] = []byte("short")
		}, "token too short"},
		{"DSN without a database in the Secret", func(_ map[string]*corev1.ConfigMap, s *corev1.Secret, _ *corev1.Container) {
			s.Data["segment-dsn"] = []byte("leaf:pw@tcp(mysql:3306)")
		}, "segment.dsn"},
		{"bad flag in the args", func(_ map[string]*corev1.ConfigMap, _ *corev1.Secret, c *corev1.Container) {
			c.Args = append(c.Args, "--log-level", "loud")
		}, `"loud" is not one of`},
		{"bad variable in the env", func(_ map[string]*corev1.ConfigMap, _ *corev1.Secret, c *corev1.Container) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "LEAF_SNOWFLAKE_LEASE_TTL", Value: "1s"})
		}, "snowflake.lease_ttl (from LEAF_SNOWFLAKE_LEASE_TTL): 1s is too short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cms := map[string]*corev1.ConfigMap{}
			for name, cm := range b.configMaps {
				cms[name] = cm.DeepCopy()
			}
			s := exampleSecret(t)
			r := runCheck(t, cms, s, w, func(c *corev1.Container) { tt.change(cms, s, c) })
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, want 2 and %q; stderr:\n%s", r.code, tt.want, r.stderr)
			}
		})
	}
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %s", c.Name, name)
	return 0
}

func checkProbe(t *testing.T, what string, p *corev1.Probe, path string) {
	t.Helper()
	switch {
	case p == nil:
		t.Errorf("no %s probe", what)
	case p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http":
		t.Errorf("%s probe %+v, want GET %s on the port http", what, p.ProbeHandler, path)
	}
}

var shutdownRE = regexp.MustCompile(`(?m)^  shutdown\s+(\S+)`)

// checkGracePeriod: Kubernetes kills a pod terminationGracePeriodSeconds
// after it starts stopping it, preStop hook included; leaf needs up to
// shutdown_timeout after SIGTERM to drain and give its IDs back.
func checkGracePeriod(t *testing.T, w workload, c corev1.Container, summary string) {
	t.Helper()
	m := shutdownRE.FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("the summary names no shutdown_timeout:\n%s", summary)
	}
	shutdown, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	var pause time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if s := c.Lifecycle.PreStop.Sleep; s != nil {
			pause = time.Duration(s.Seconds) * time.Second
		} else {
			t.Error("a preStop hook other than sleep: the image has no shell")
		}
	}
	grace := 30 * time.Second // the Kubernetes default
	if g := w.template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if grace <= pause+shutdown {
		t.Errorf("terminationGracePeriodSeconds %v leaves no room for the preStop pause %v and shutdown_timeout %v", grace, pause, shutdown)
	}
}

// exampleSecret is the Secret README.md has the operator create: a random
// admin token and the DSN of the database.
func exampleSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "leaf"},
		Data: map[string][]byte{
			"admin-token": []byte(hex.EncodeToString(token)),
			"segment-dsn": []byte("leaf:example-password@tcp(mysql:3306)/leaf"),
		},
	}
}

var literalRE = regexp.MustCompile(`--from-literal=([A-Za-z0-9._-]+)=`)

// TestSecretDocumented: README.md's command creates the Secret the
// manifests read, with every key they read, as exampleSecret does.
func TestSecretDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("kubectl create secret generic leaf ")) {
		t.Fatal("README.md does not say how to create the Secret leaf")
	}
	var documented []string
	for _, m := range literalRE.FindAllSubmatch(readme, -1) {
		documented = append(documented, string(m[1]))
	}
	var example []string
	for k := range exampleSecret(t).Data {
		example = append(example, k)
	}
	for _, v := range variants {
		w := loadVariant(t, v).workload(t)
		used := secretKeys(t, w)
		for _, keys := range [][]string{documented, example} {
			sort.Strings(keys)
			if !slices.Equal(keys, used) {
				t.Errorf("%s reads the Secret keys %v; README.md documents %v, the test's example has %v", v, used, documented, example)
				break
			}
		}
	}
}

// secretKeys lists the keys of the Secret leaf that w reads.
func secretKeys(t *testing.T, w workload) []string {
	t.Helper()
	set := map[string]bool{}
	for _, c := range w.template.Spec.Containers {
		for _, e := range c.Env {
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
				if r.SecretKeyRef.Name != "leaf" {
					t.Errorf("env %s reads the Secret %s, not leaf", e.Name, r.SecretKeyRef.Name)
				}
				set[r.SecretKeyRef.Key] = true
			}
		}
	}
	for _, v := range w.template.Spec.Volumes {
		if s := v.Secret; s != nil {
			if s.SecretName != "leaf" {
				t.Errorf("volume %s mounts the Secret %s, not leaf", v.Name, s.SecretName)
			}
			if len(s.Items) == 0 {
				t.Errorf("volume %s mounts every key of the Secret: list the ones leaf reads", v.Name)
			}
			for _, it := range s.Items {
				set[it.Key] = true
			}
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// result is the outcome of one leaf run.
type result struct {
	code           int
	stdout, stderr string
}

// image is what the Dockerfile's final stage gives a container.
type image struct {
	entrypoint, cmd []string
	env             []string // KEY=value
	workdir         string
}

// readImage reads the final stage of the repository's Dockerfile.
func readImage(t *testing.T) image {
	t.Helper()
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.ReplaceAll(string(data), "\\\n", " ")
	var img image
	for line := range strings.Lines(joined) {
		instr, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest = strings.TrimSpace(rest)
		switch instr {
		case "FROM":
			img = image{} // only the final stage counts
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				if !strings.Contains(kv, "=") {
					t.Fatalf("Dockerfile ENV %q: want KEY=value pairs", rest)
				}
				img.env = append(img.env, kv)
			}
		case "WORKDIR":
			img.workdir = rest
		case "ENTRYPOINT", "CMD":
			var words []string
			if err := json.Unmarshal([]byte(rest), &words); err != nil {
				t.Fatalf("Dockerfile %s %s: want the JSON form: %v", instr, rest, err)
			}
			if instr == "CMD" {
				img.cmd = words
			} else {
				img.entrypoint = words
			}
		}
	}
	if len(img.entrypoint) == 0 || img.workdir == "" {
		t.Fatalf("the Dockerfile's final stage has no ENTRYPOINT or WORKDIR: %+v", img)
	}
	return img
}

// runCheck runs 'leaf serve --check' with what w's leaf container would
// get: the image's entrypoint, environment and working directory; the
// container's args and env, $(VAR) references expanded and valueFrom
// resolved (the Secret, the ConfigMaps, sample pod fields, the container's
// resources); its volumes as directories, the ConfigMaps' and the Secret's
// keys as files. Paths under a mount are rewritten to its directory, in the
// args, the env and the mounted files alike. change, if not nil, edits the
// container first. The emptyDir volumes must still be empty afterwards:
// --check writes nothing.
func runCheck(t *testing.T, cms map[string]*corev1.ConfigMap, secret *corev1.Secret, w workload, change func(*corev1.Container)) result {
	t.Helper()
	img := readImage(t)
	orig := w.container(t)
	c := *orig.DeepCopy()
	if change != nil {
		change(&c)
	}
	if len(c.Command) > 0 {
		t.Fatalf("the container sets command %q: the image's ENTRYPOINT %q is the binary this test runs", c.Command, img.entrypoint)
	}
	if len(c.EnvFrom) > 0 {
		t.Fatal("envFrom is not supported by this test")
	}

	// Volumes first: every later value may name a path under a mount.
	root := t.TempDir()
	mounts := map[string]string{} // mountPath -> directory
	type fileOut struct{ path, content string }
	var files []fileOut
	var empty []string
	for _, vm := range c.VolumeMounts {
		if vm.SubPath != "" || vm.SubPathExpr != "" {
			t.Fatalf("volumeMount %s: subPath is not supported by this test", vm.Name)
		}
		i := slices.IndexFunc(w.template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i < 0 {
			t.Fatalf("volumeMount %s names no volume", vm.Name)
		}
		v := w.template.Spec.Volumes[i]
		dir := filepath.Join(root, "volume-"+v.Name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		mounts[vm.MountPath] = dir
		var data map[string]string
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			cm := cms[v.ConfigMap.Name]
			if cm == nil {
				t.Fatalf("volume %s: no ConfigMap %s in the variant", v.Name, v.ConfigMap.Name)
			}
			data, items = cm.Data, v.ConfigMap.Items
		case v.Secret != nil:
			if v.Secret.SecretName != secret.Name {
				t.Fatalf("volume %s: the Secret %s is not %s", v.Name, v.Secret.SecretName, secret.Name)
			}
			data = map[string]string{}
			for k, b := range secret.Data {
				data[k] = string(b)
			}
			items = v.Secret.Items
		case v.EmptyDir != nil:
			empty = append(empty, dir)
			continue
		default:
			t.Fatalf("volume %s: only configMap, secret and emptyDir volumes are supported by this test", v.Name)
		}
		if len(items) == 0 {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			content, ok := data[it.Key]
			if !ok {
				t.Fatalf("volume %s: no key %s", v.Name, it.Key)
			}
			files = append(files, fileOut{filepath.Join(dir, it.Path), content})
		}
	}
	rewrite := mountRewriter(mounts)
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(rewrite(f.content)), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The environment: the image's, then the container's in order, as the
	// kubelet builds it.
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range img.env {
		k, v, _ := strings.Cut(kv, "=")
		set(k, rewrite(v))
	}
	podFields := map[string]string{
		"metadata.name":      w.name + "-0",
		"metadata.namespace": "default",
		"status.podIP":       "10.244.1.7",
		"status.hostIP":      "10.0.0.5",
		"spec.nodeName":      "node-1",
	}
	for _, e := range c.Env {
		value := e.Value
		switch r := e.ValueFrom; {
		case r == nil:
			value = expand(value, env)
		case r.SecretKeyRef != nil:
			if r.SecretKeyRef.Name != secret.Name {
				t.Fatalf("env %s: the Secret %s is not %s", e.Name, r.SecretKeyRef.Name, secret.Name)
			}
			b, ok := secret.Data[r.SecretKeyRef.Key]
			if !ok {
				t.Fatalf("env %s: the Secret has no key %s", e.Name, r.SecretKeyRef.Key)
			}
			value = string(b)
		case r.ConfigMapKeyRef != nil:
			cm := cms[r.ConfigMapKeyRef.Name]
			v, ok := "", false
			if cm != nil {
				v, ok = cm.Data[r.ConfigMapKeyRef.Key]
			}
			if !ok {
				t.Fatalf("env %s: no key %s in a ConfigMap %s", e.Name, r.ConfigMapKeyRef.Key, r.ConfigMapKeyRef.Name)
			}
			value = v
		case r.FieldRef != nil:
			v, ok := podFields[r.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("env %s: fieldRef %s is not supported by this test", e.Name, r.FieldRef.FieldPath)
			}
			value = v
		case r.ResourceFieldRef != nil:
			value = resourceValue(t, c, r.ResourceFieldRef)
		}
		set(e.Name, rewrite(value))
	}
	var environ []string
	for _, k := range order {
		environ = append(environ, k+"="+env[k])
	}

	args := c.Args
	if len(args) == 0 {
		args = img.cmd
	}
	var argv []string
	for _, a := range args {
		argv = append(argv, rewrite(expand(a, env)))
	}
	if len(argv) == 0 || argv[0] != "serve" {
		t.Fatalf("the container runs leaf %q, not leaf serve", argv)
	}
	workdir := rewrite(img.workdir)
	if workdir == img.workdir {
		workdir = t.TempDir() // not a mount: the image's own directory
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, leafBin, append(argv, "--check")...)
	cmd.Env, cmd.Dir = environ, workdir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	for _, dir := range empty {
		if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
			t.Errorf("leaf serve --check wrote into the emptyDir %s (%v): %v", dir, err, entries)
		}
	}
	return r
}

// mountRewriter returns a function that replaces every mount path in a
// string, where it is a whole path or a prefix of one, by its directory.
func mountRewriter(mounts map[string]string) func(string) string {
	paths := make([]string, 0, len(mounts))
	for p := range mounts {
		paths = append(paths, p)
	}
	// Longest first, so that /a/b is rewritten before /a.
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	res := make([]*regexp.Regexp, len(paths))
	for i, p := range paths {
		res[i] = regexp.MustCompile(regexp.QuoteMeta(strings.TrimSuffix(p, "/")) + `(/|$|[^A-Za-z0-9._-])`)
	}
	return func(s string) string {
		for i, p := range paths {
			dir := mounts[p]
			s = res[i].ReplaceAllStringFunc(s, func(m string) string {
				return dir + m[len(strings.TrimSuffix(p, "/")):]
			})
		}
		return s
	}
}

var varRefRE = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand replaces $(NAME) by the value of a variable defined before, as the
// kubelet does in env values and args; $$ is a literal $, and a reference
// to an undefined variable is left as it is.
func expand(s string, env map[string]string) string {
	return varRefRE.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// resourceValue is what the kubelet puts in a resourceFieldRef variable:
// the container's request or limit, divided by the divisor and rounded up.
func resourceValue(t *testing.T, c corev1.Container, r *corev1.ResourceFieldSelector) string {
	t.Helper()
	if r.ContainerName != "" && r.ContainerName != c.Name {
		t.Fatalf("resourceFieldRef of container %s: only the container's own are supported by this test", r.ContainerName)
	}
	kind, name, _ := strings.Cut(r.Resource, ".")
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		t.Fatalf("resourceFieldRef %s: the container sets none (the node's capacity would be used)", r.Resource)
	}
	divisor := r.Divisor
	if divisor.IsZero() {
		return strconv.FormatInt(q.Value(), 10)
	}
	return strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10)
}

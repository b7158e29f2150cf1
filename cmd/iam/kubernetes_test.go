package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The Kubernetes manifests are validated offline (no schema is downloaded):
// every object is decoded strictly, unknown or misplaced fields refused, into
// the typed structs of the Kubernetes API it declares (k8s.io/api, the same
// types the API server decodes into; quantities, int-or-string ports and
// enums parse as the server parses them). Then what a schema cannot see is
// checked against the binary: subcommands, probes on real paths and ports,
// every variable one it reads, selectors that select, the kustomization
// listing every file.

const k8sDir = "../../deploy/kubernetes"

// k8sObjects is the decoded base.
type k8sObjects struct {
	deployments  map[string]*appsv1.Deployment
	jobs         map[string]*batchv1.Job
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	services     map[string]*corev1.Service
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs         map[string]*policyv1.PodDisruptionBudget
	kustomize    k8sKustomization
	resourceFile []string // the YAML files besides kustomization.yaml
}

// k8sKustomization is the part of kustomize's Kustomization the base uses
// (decoded strictly, so a field outside it fails).
type k8sKustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images"`
}

// decodeStrict decodes one YAML document into v, refusing unknown fields.
func decodeStrict(doc []byte, v any) error {
	return yaml.UnmarshalStrict(doc, v)
}

// loadK8s decodes every object of deploy/kubernetes.
func loadK8s(t *testing.T) *k8sObjects {
	t.Helper()
	o := &k8sObjects{
		deployments: map[string]*appsv1.Deployment{}, jobs: map[string]*batchv1.Job{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		services: map[string]*corev1.Service{}, hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{},
	}
	files, err := filepath.Glob(filepath.Join(k8sDir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", k8sDir, err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		data, err := os.ReadFile(path) //nolint:gosec // a manifest of the repository's deploy/kubernetes
		if err != nil {
			t.Fatal(err)
		}
		if name == "kustomization.yaml" {
			if err := decodeStrict(data, &o.kustomize); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if filepath.Ext(name) != ".yaml" {
			t.Errorf("%s: only .yaml manifests belong in %s", name, k8sDir)
			continue
		}
		o.resourceFile = append(o.resourceFile, name)
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			if err := o.add([]byte(doc)); err != nil {
				t.Errorf("%s, document %d: %v", name, i+1, err)
			}
		}
	}
	return o
}

// add decodes one object into the type of its apiVersion and kind.
func (o *k8sObjects) add(doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(head.Metadata.Name); len(errs) > 0 {
		return fmt.Errorf("%s name %q: %s", head.Kind, head.Metadata.Name, strings.Join(errs, "; "))
	}
	name := head.Metadata.Name
	var err error
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 Deployment":
		v := &appsv1.Deployment{}
		err, o.deployments[name] = decodeStrict(doc, v), v
	case "batch/v1 Job":
		v := &batchv1.Job{}
		err, o.jobs[name] = decodeStrict(doc, v), v
	case "v1 ConfigMap":
		v := &corev1.ConfigMap{}
		err, o.configMaps[name] = decodeStrict(doc, v), v
	case "v1 Secret":
		v := &corev1.Secret{}
		err, o.secrets[name] = decodeStrict(doc, v), v
	case "v1 Service":
		v := &corev1.Service{}
		err, o.services[name] = decodeStrict(doc, v), v
	case "autoscaling/v2 HorizontalPodAutoscaler":
		v := &autoscalingv2.HorizontalPodAutoscaler{}
		err, o.hpas[name] = decodeStrict(doc, v), v
	case "policy/v1 PodDisruptionBudget":
		v := &policyv1.PodDisruptionBudget{}
		err, o.pdbs[name] = decodeStrict(doc, v), v
	default:
		return fmt.Errorf("%s %s %q: a kind this test does not validate", head.APIVersion, head.Kind, name)
	}
	if err != nil {
		return fmt.Errorf("%s %q: %w", head.Kind, name, err)
	}
	return nil
}

// TestKubernetes_ManifestsAreValid validates deploy/kubernetes (see above).
func TestKubernetes_ManifestsAreValid(t *testing.T) {
	o := loadK8s(t)
	known, err := configVariables()
	if err != nil {
		t.Fatal(err)
	}

	// The kustomization lists every file, and only files that exist.
	k := o.kustomize
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml is %s %s", k.APIVersion, k.Kind)
	}
	if got, want := slices.Sorted(slices.Values(k.Resources)), slices.Sorted(slices.Values(o.resourceFile)); !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml lists %v, the folder holds %v", got, want)
	}
	if len(k.Images) != 1 || k.Images[0].Name != "iam" || k.Images[0].NewTag == "" || k.Images[0].NewTag == "latest" {
		t.Errorf("kustomization.yaml should map image iam to a pinned tag: %+v", k.Images)
	}

	// Every variable set anywhere is one the binary reads.
	for name, cm := range o.configMaps {
		for key := range cm.Data {
			if !slices.Contains(known, key) {
				t.Errorf("ConfigMap %s sets %s, which the binary does not read", name, key)
			}
		}
	}
	for name, s := range o.secrets {
		for key, v := range s.StringData {
			if !slices.Contains(known, key) {
				t.Errorf("Secret %s holds %s, which the binary does not read", name, key)
			}
			if v != "" {
				t.Errorf("Secret %s holds a value for %s: the base is a template without values", name, key)
			}
		}
		if len(s.Data) > 0 {
			t.Errorf("Secret %s holds data: the base is a template without values", name)
		}
	}

	// The workloads: the commands compose runs, on the iam image, hardened.
	want := map[string][]string{"iam-migrate": composeServices["iam-migrate"], "iam-serve": composeServices["iam-serve"], "iam-worker": composeServices["iam-worker"]}
	pods := map[string]*corev1.PodTemplateSpec{}
	for name, d := range o.deployments {
		pods[name] = &d.Spec.Template
		sel, err := metaSelector(d.Spec.Selector.MatchLabels)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Deployment %s: its selector does not select its pods", name)
		}
	}
	for name, j := range o.jobs {
		pods[name] = &j.Spec.Template
		if p := j.Spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyOnFailure && p != corev1.RestartPolicyNever {
			t.Errorf("Job %s: restartPolicy %q", name, p)
		}
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for n := range pods {
			if !yield(n) {
				return
			}
		}
	}); !slices.Equal(got, []string{"iam-migrate", "iam-serve", "iam-worker"}) {
		t.Fatalf("workloads %v, want iam-migrate (Job), iam-serve and iam-worker (Deployments)", got)
	}
	if _, ok := o.jobs["iam-migrate"]; !ok {
		t.Error("iam-migrate should be a Job")
	}
	shutdown := 20 * time.Second // IAM_SHUTDOWN_TIMEOUT's default
	if v, err := time.ParseDuration(o.configMaps["iam-config"].Data["IAM_SHUTDOWN_TIMEOUT"]); err == nil {
		shutdown = v
	}
	for name, pod := range pods {
		spec := pod.Spec
		if len(spec.Containers) != 1 {
			t.Errorf("%s runs %d containers, want 1", name, len(spec.Containers))
			continue
		}
		c := spec.Containers[0]
		if c.Image != "iam" {
			t.Errorf("%s runs image %q, want iam (set by the kustomization)", name, c.Image)
		}
		if len(c.Command) > 0 || !slices.Equal(c.Args, want[name]) {
			t.Errorf("%s runs command %v args %v, want the image's entrypoint with %v", name, c.Command, c.Args, want[name])
		}
		if root := spec.SecurityContext; root == nil || root.RunAsNonRoot == nil || !*root.RunAsNonRoot || root.RunAsUser == nil || *root.RunAsUser == 0 {
			t.Errorf("%s: the pod must run as a non-root user", name)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: the container needs a read-only root, no privilege escalation and no capabilities", name)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: iam needs no Kubernetes API token; do not mount one", name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: CPU and memory requests and a memory limit are needed", name)
		}
		if pod.Spec.TerminationGracePeriodSeconds != nil && time.Duration(*pod.Spec.TerminationGracePeriodSeconds)*time.Second <= shutdown {
			t.Errorf("%s: terminationGracePeriodSeconds %d leaves IAM_SHUTDOWN_TIMEOUT %v no room", name, *pod.Spec.TerminationGracePeriodSeconds, shutdown)
		}

		// Its environment: from ConfigMaps and Secrets of the base, keys
		// the binary reads, and what its subcommand requires.
		env := map[string]string{}
		for _, from := range c.EnvFrom {
			switch {
			case from.ConfigMapRef != nil:
				cm, ok := o.configMaps[from.ConfigMapRef.Name]
				if !ok {
					t.Errorf("%s takes ConfigMap %s, which the base lacks", name, from.ConfigMapRef.Name)
					continue
				}
				for k, v := range cm.Data {
					env[k] = v
				}
			case from.SecretRef != nil:
				t.Errorf("%s takes all of Secret %s: name the keys it needs", name, from.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if !slices.Contains(known, e.Name) {
				t.Errorf("%s sets %s, which the binary does not read", name, e.Name)
			}
			switch ref := e.ValueFrom; {
			case ref == nil:
				env[e.Name] = e.Value
			case ref.SecretKeyRef != nil:
				s, ok := o.secrets[ref.SecretKeyRef.Name]
				if _, has := s.StringData[ref.SecretKeyRef.Key]; !ok || !has {
					t.Errorf("%s: %s refers to %s/%s, which the base lacks", name, e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
				}
				env[e.Name] = "(secret)"
			case ref.ConfigMapKeyRef != nil:
				cm, ok := o.configMaps[ref.ConfigMapKeyRef.Name]
				v, has := cm.Data[ref.ConfigMapKeyRef.Key]
				if !ok || !has {
					t.Errorf("%s: %s refers to %s/%s, which the base lacks", name, e.Name, ref.ConfigMapKeyRef.Name, ref.ConfigMapKeyRef.Key)
				}
				env[e.Name] = v
			default:
				t.Errorf("%s: %s takes its value from neither a Secret nor a ConfigMap", name, e.Name)
			}
		}
		required := []string{"IAM_DATABASE_URL"}
		switch name {
		case "iam-serve":
			required = append(required, "IAM_ENCRYPTION_KEY", "IAM_AUDIT_SIGNING_KEY", "IAM_SECRET_KEY", "IAM_HTTP_ADDR", "IAM_TEMPORAL_ADDRESS")
		case "iam-worker":
			required = append(required, "IAM_ENCRYPTION_KEY", "IAM_AUDIT_SIGNING_KEY", "IAM_HEALTH_ADDR", "IAM_TEMPORAL_ADDRESS")
		}
		for _, key := range required {
			if _, ok := env[key]; !ok {
				t.Errorf("%s lacks %s", name, key)
			}
		}
		var vars []string
		for k, v := range env {
			if v != "(secret)" {
				vars = append(vars, k+"="+v)
			}
		}
		if _, err := loadConfig(vars); err != nil {
			t.Errorf("%s: its configuration does not load: %v", name, err)
		}

		// Probes: readiness /readyz, liveness /healthz, on the port the
		// process listens on.
		if name == "iam-migrate" {
			continue
		}
		listenVar := map[string]string{"iam-serve": "IAM_HTTP_ADDR", "iam-worker": "IAM_HEALTH_ADDR"}[name]
		_, port, err := net.SplitHostPort(env[listenVar])
		if err != nil {
			t.Errorf("%s: %s %q is no listen address", name, listenVar, env[listenVar])
			continue
		}
		for _, p := range []struct {
			what  string
			probe *corev1.Probe
			path  string
		}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s has no HTTP %s", name, p.what)
				continue
			}
			if p.probe.HTTPGet.Path != p.path {
				t.Errorf("%s: %s on %s, want %s", name, p.what, p.probe.HTTPGet.Path, p.path)
			}
			if got := containerPort(c, p.probe.HTTPGet.Port); fmt.Sprint(got) != port {
				t.Errorf("%s: %s on port %s (%d), but %s listens on %s", name, p.what, p.probe.HTTPGet.Port.String(), got, listenVar, port)
			}
			if p.probe.TimeoutSeconds < 4 && p.what == "readinessProbe" {
				t.Errorf("%s: %s times out in %ds, before /readyz's own 3 s checks end", name, p.what, p.probe.TimeoutSeconds)
			}
		}
	}

	// Requests measured (docs/benchmarks.md): in the 1M-row enrollment the
	// production build's serve peaks at 78 MiB RSS, a worker at 102 MiB.
	for name, peak := range map[string]string{"iam-serve": "78Mi", "iam-worker": "102Mi"} {
		if d := o.deployments[name]; d != nil {
			if mem := d.Spec.Template.Spec.Containers[0].Resources.Requests.Memory(); mem.Cmp(resource.MustParse(peak)) < 0 {
				t.Errorf("%s requests %s, under the %s it uses (docs/benchmarks.md)", name, mem, peak)
			}
		}
	}

	// Services, budgets and the autoscaler select real pods.
	for name, s := range o.services {
		d := selectedDeployment(t, o, s.Spec.Selector)
		if d == nil {
			t.Errorf("Service %s selects no Deployment", name)
			continue
		}
		for _, p := range s.Spec.Ports {
			if containerPort(d.Spec.Template.Spec.Containers[0], p.TargetPort) == 0 {
				t.Errorf("Service %s port %s targets %s, which %s does not expose", name, p.Name, p.TargetPort.String(), d.Name)
			}
		}
	}
	for _, name := range []string{"iam-serve", "iam-worker"} {
		pdb, ok := o.pdbs[name]
		if !ok {
			t.Errorf("no PodDisruptionBudget for %s", name)
			continue
		}
		if d := selectedDeployment(t, o, pdb.Spec.Selector.MatchLabels); d == nil || d.Name != name {
			t.Errorf("PodDisruptionBudget %s does not select Deployment %s", name, name)
		}
	}
	hpa, ok := o.hpas["iam-worker"]
	if !ok {
		t.Fatal("no HorizontalPodAutoscaler for iam-worker")
	}
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || o.deployments[ref.Name] == nil || ref.Name != "iam-worker" {
		t.Errorf("the autoscaler scales %+v, want Deployment iam-worker", ref)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas < *hpa.Spec.MinReplicas || len(hpa.Spec.Metrics) == 0 {
		t.Errorf("the autoscaler's range or metrics are wrong: %+v", hpa.Spec)
	}
}

// containerPort resolves a probe's or Service's port (number or name) to a
// port the container declares; 0 when it declares none such.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

func metaSelector(match map[string]string) (labels.Selector, error) {
	if len(match) == 0 {
		return nil, fmt.Errorf("empty selector")
	}
	return labels.SelectorFromValidatedSet(labels.Set(match)), nil
}

// selectedDeployment returns the one Deployment whose pods match selector.
func selectedDeployment(t *testing.T, o *k8sObjects, match map[string]string) *appsv1.Deployment {
	t.Helper()
	sel, err := metaSelector(match)
	if err != nil {
		return nil
	}
	var found []*appsv1.Deployment
	for _, d := range o.deployments {
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

// TestKubernetes_StrictDecodingRefusesAMistake: the validation above would
// catch a misspelt or misplaced field, not accept it silently.
func TestKubernetes_StrictDecodingRefusesAMistake(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(k8sDir, "serve-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to string }{
		{"readinessProbe:", "readynessProbe:"},      // unknown field
		{"memory: 128Mi", "memory: 128 megabytes"},  // not a quantity
		{"containerPort: 8080", "containerPort: x"}, // not a number
	} {
		bad := bytes.Replace(data, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(bad, data) {
			t.Fatalf("serve-deployment.yaml has no %q", c.from)
		}
		if err := (&k8sObjects{deployments: map[string]*appsv1.Deployment{}}).add(bad); err == nil {
			t.Errorf("%q instead of %q decodes without error", c.to, c.from)
		}
	}
}

{{/* The name of every object: the release name when it names shadowgate already, so
`helm install shadowgate` gives the kustomize base's names. */}}
{{- define "shadowgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "shadowgate.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "shadowgate.labels" -}}
{{ include "shadowgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* shadowgate's image, of serve and of the helm test Jobs that run its binary: repository,
tag (the appVersion when empty) and, when set, the digest it is pulled by. */}}
{{- define "shadowgate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end -}}

{{- define "shadowgate.policyName" -}}{{ include "shadowgate.fullname" . }}-policy{{- end -}}
{{- define "shadowgate.tlsSecretName" -}}{{ include "shadowgate.fullname" . }}-tls{{- end -}}
{{- define "shadowgate.servingCertName" -}}{{ include "shadowgate.fullname" . }}-serving{{- end -}}

{{/* The name the API server checks the serving certificate against: it calls the webhooks'
Service as <service>.<namespace>.svc. */}}
{{- define "shadowgate.dnsName" -}}
{{- printf "%s.%s.svc" (include "shadowgate.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* The host of webhooks.url, without its port or an IPv6 literal's brackets; empty when no
url is set. The serving certificate names it beside the Service's name. */}}
{{- define "shadowgate.urlHost" -}}
{{- with .Values.webhooks.url -}}
{{- (urlParse .).hostname -}}
{{- end -}}
{{- end -}}

{{/* Whether the url's host is an IP literal (one in the certificate's IP addresses) rather
than a DNS name: "true" or empty. */}}
{{- define "shadowgate.urlHostIsIP" -}}
{{- $host := include "shadowgate.urlHost" . -}}
{{- if or (contains ":" $host) (regexMatch "^[0-9.]+$" $host) }}true{{ end -}}
{{- end -}}

{{/* clientConfig of a webhook: (dict "root" $ "path" PATH "caBundle" BASE64-OR-EMPTY). The
Service by default; webhooks.url with the path appended when set, for an API server that
reaches shadowgate another way than through the cluster's Service network. */}}
{{- define "shadowgate.clientConfig" -}}
clientConfig:
  {{- with .root.Values.webhooks.url }}
  url: {{ printf "%s%s" (trimSuffix "/" .) $.path | quote }}
  {{- else }}
  service:
    name: {{ include "shadowgate.fullname" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
  {{- end }}
  {{- with .caBundle }}
  caBundle: {{ . }}
  {{- end }}
{{- end -}}

{{/* namespaceSelector of a webhook: (dict "exempt" NAMESPACES "extra" LABEL-SELECTOR). The
namespaces are excluded by the label the API server sets on every namespace; the extra
selector's terms must hold as well. */}}
{{- define "shadowgate.namespaceSelector" -}}
{{- if or .exempt .extra -}}
namespaceSelector:
  {{- with .extra.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if or .exempt .extra.matchExpressions }}
  matchExpressions:
  {{- with .exempt }}
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ toJson . }}
  {{- end }}
  {{- with .extra.matchExpressions }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- end }}
{{- end -}}
{{- end -}}

{{/* The CEL test of a pod's spec.nodeName (name: the CEL expression of it): any node, or with
webhooks.virtualNodes one of those, so that pods bound to ordinary nodes (a static pod's mirror,
a `kubectl debug node/...` pod) are not refused during an outage. toJson quotes each name. */}}
{{- define "shadowgate.nodeNameTest" -}}
{{- if .Values.webhooks.virtualNodes -}}
{{ .name }} in {{ toJson .Values.webhooks.virtualNodes }}
{{- else -}}
{{ .name }} != ''
{{- end -}}
{{- end -}}

{{/* matchConditions of the pod webhooks, /mutate-pods and /validate-pods alike: pods that
carry an interLink annotation, tolerate the virtual node's taint or are created with a
spec.nodeName (which skips the scheduler and its taints), then the values' own.
interlink.eu/shadow-for does not count: every shadow object carries it, the shadow
Deployment's pod template too, and shadow pods (or the ReplicaSets of shadow Deployments) sent
here would cost a call each and, under failurePolicy Fail, could not be made again during an
outage. */}}
{{- define "shadowgate.podConditions" -}}
- name: offloaded-pod
  expression: >-
    (has(object.metadata.annotations) && object.metadata.annotations.exists(k, (k.startsWith('interlink.eu/') && k != 'interlink.eu/shadow-for') || k == 'slurm-job.vk.io/pre-exec'))
    || (has(object.spec.tolerations) && object.spec.tolerations.exists(t, has(t.key) ? t.key == 'virtual-node.interlink/no-schedule' : (has(t.operator) && t.operator == 'Exists')))
    || (has(object.spec.nodeName) && {{ include "shadowgate.nodeNameTest" (dict "name" "object.spec.nodeName" "Values" .Values) }})
{{- include "shadowgate.valuesConditions" . }}
{{- end -}}

{{/* matchConditions of /validate-workloads: pod templates as the pod webhooks' pods, but not
in shadowgate's own writes; then the values' own. */}}
{{- define "shadowgate.workloadConditions" -}}
# shadowgate's own writes (its shadow Deployments) are its output, built from a pod already
# judged: calling back for them cost every shadow a round trip. Every pod a workload makes is
# still judged by /validate-pods, which skips no user.
- name: not-shadowgate
  expression: request.userInfo.username != '{{ include "shadowgate.serviceAccountUser" . }}'
- name: offloaded-template
  expression: >-
    [has(object.spec.jobTemplate) ? object.spec.jobTemplate.spec.template : object.spec.template].exists(p,
    (has(p.metadata) && has(p.metadata.annotations) && p.metadata.annotations.exists(k, (k.startsWith('interlink.eu/') && k != 'interlink.eu/shadow-for') || k == 'slurm-job.vk.io/pre-exec'))
    || (has(p.spec) && has(p.spec.tolerations) && p.spec.tolerations.exists(t, has(t.key) ? t.key == 'virtual-node.interlink/no-schedule' : (has(t.operator) && t.operator == 'Exists')))
    || (has(p.spec) && has(p.spec.nodeName) && {{ include "shadowgate.nodeNameTest" (dict "name" "p.spec.nodeName" "Values" .Values) }}))
{{- include "shadowgate.valuesConditions" . }}
{{- end -}}

{{/* The values' matchConditions, appended to those of every webhook that judges pods or pod
templates; the output starts with a newline. */}}
{{- define "shadowgate.valuesConditions" -}}
{{- with .Values.webhooks.matchConditions }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The user the API server names serve's ServiceAccount in an admission request, which the
matchConditions skip for shadowgate's own writes. */}}
{{- define "shadowgate.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "shadowgate.fullname" . }}
{{- end -}}

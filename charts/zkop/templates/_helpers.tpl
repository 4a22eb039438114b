{{/* The release's name for zkop's objects: "zkop" for a release named zkop (Helm's usual fullname). */}}
{{- define "zkop.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "zkop.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object: manifests/'s (name, component, part-of) and Helm's. Call with (list . "component"). */}}
{{- define "zkop.labels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "zkop.name" $root }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/part-of: zkop
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The controller-manager Pods' selector (as manifests/manager/deployment.yaml). */}}
{{- define "zkop.selectorLabels" -}}
app.kubernetes.io/name: {{ include "zkop.name" . }}
app.kubernetes.io/component: controller-manager
{{- end -}}

{{- define "zkop.serviceAccountName" -}}
{{- default (include "zkop.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "zkop.authSecretName" -}}
{{- default (printf "%s-zookeeper-auth" (include "zkop.fullname" .)) .Values.zookeeper.auth.existingSecret -}}
{{- end -}}

{{- define "zkop.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* A ServiceAccount subject: zkop's. */}}
{{- define "zkop.subjects" -}}
subjects:
  - kind: ServiceAccount
    name: {{ include "zkop.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
{{- end -}}

{{- /* "true" when a rule of tenancy.policy selects namespaces by label (zkop then watches Namespaces), else "". */ -}}
{{- define "zkop.tenancyNamespaceSelector" -}}
{{- $rules := dig "tenancy" "rules" list (.Values.tenancy.policy | default dict) -}}
{{- range $rules }}{{ if hasKey . "namespaceSelector" }}true{{ end }}{{ end -}}
{{- end }}

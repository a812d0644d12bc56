{{- define "sc.name" -}}sandbox-controller{{- end -}}

{{- define "sc.labels" -}}
app.kubernetes.io/name: sandbox-controller
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sc.selector" -}}
app.kubernetes.io/name: sandbox-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sc.sealSecret" -}}
{{- if .Values.seal.existingSecret -}}{{ .Values.seal.existingSecret }}{{- else -}}sandbox-controller-seal{{- end -}}
{{- end -}}

{{- define "sc.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

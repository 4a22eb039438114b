

def test_zkop_run_with_an_unusable_certificate_exits_2(kubeconfig: str, kube: KubeClient, tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate\n")
    (tmp_path / "tls.key").write_text("not a key\n")
    proc = OperatorProcess(kubeconfig, "127.0.0.1:1", ["--metrics-secure", f"--metrics-cert-dir={tmp_path}"])
    try:
        proc.start(wait_ready=False)
        assert proc.wait(30) == 2
        assert "cannot serve metrics securely" in proc.log_tail()
    finally:
        proc.stop()
        proc.log_path.unlink(missing_ok=True)

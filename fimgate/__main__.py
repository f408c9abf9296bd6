from fimgate.cli import main

raise SystemExit(main())

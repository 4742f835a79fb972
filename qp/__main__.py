from qp.main import main

raise SystemExit(main())
